"""The core's modules import only from their own layer or lower ones (docs/architecture.md)."""
import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[1] / "core"

LAYERS = [
    {"errors", "arith", "text", "parallel", "env", "tensors"},
    {"problem", "hookspecs", "reference", "driver_args", "tuning", "policy", "epilogue"},
    {"calls", "kernel_cache", "plugins", "handle"},
    {"sqlite_db", "find_db", "perf_db", "tuned", "solutions", "timing", "verify", "fusion"},
    {"execute", "worker", "search", "find", "immediate", "explain", "api", "db_transfer",
     "bias_grad"},
    {"cli", "tune", "testing", "check_worker", "docgen", "new_plugin", "bench", "__init__",
     "epilogue_check", "cli_epilogue"},
]
LEVEL = {name: level for level, names in enumerate(LAYERS) for name in names}
#: Imports that run later than load time, inside a function, on purpose (see the module).
DEFERRED = {("worker", "find"), ("worker", "execute")}


def _imports(path):
    """The core modules ``path`` imports, leaving out imports for type checkers only."""
    tree = ast.parse(path.read_text())
    typing_only = {id(inner) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and getattr(node.test, "id", None) == "TYPE_CHECKING"
                   for inner in ast.walk(node)}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level and id(node) not in typing_only:
            names = [node.module] if node.module else [a.name for a in node.names]
            yield from (name.split(".")[0] for name in names)


@pytest.mark.parametrize("path", sorted(CORE.glob("*.py")), ids=lambda p: p.stem)
def test_module_imports_only_lower_layers(path):
    """Each import of a core module names a module of the same or a lower layer."""
    module = path.stem
    assert module in LEVEL, f"{module}: add it to a layer here and in docs/architecture.md"
    for imported in _imports(path):
        if imported in LEVEL and (module, imported) not in DEFERRED:
            assert LEVEL[imported] <= LEVEL[module], f"{module} imports {imported}"
