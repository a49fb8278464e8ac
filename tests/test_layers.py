"""The core's wings import only from their own wing or lower ones, and no module imports itself
through others (docs/architecture.md has the map)."""
import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[1] / "core"

#: The wings from the bottom up: a module may import modules of its own wing or of a lower one.
#: A wing is a subpackage of convsolve, or a set of the door's top-level modules.
WINGS = [
    ("base", {"errors", "env", "arith", "text"}),
    ("model", {"epilogue", "problem", "tuning", "reference", "hookspecs"}),
    ("solvers", {"solvers"}),
    ("device", {"device"}),
    ("db", {"db"}),
    ("heuristics", {"heuristics"}),
    ("engine", {"engine"}),
    ("scale", {"scale"}),
    ("api", {"api"}),
    ("torch", {"torch"}),
    ("testing", {"testing"}),
    ("bench", {"bench"}),
    ("cli", {"cli"}),
    ("door", {"__init__"}),
]
RANK = {top: rank for rank, (_, tops) in enumerate(WINGS) for top in tops}


def module_name(path):
    """``path``'s dotted name inside convsolve ('' for convsolve/__init__.py)."""
    parts = list(path.relative_to(CORE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in CORE.rglob("*.py") if "plugin_template" not in p.parts}


def wing_rank(name):
    """The rank in WINGS of module ``name``."""
    return RANK[name.split(".")[0] if name else "__init__"]


def imports(name):
    """The convsolve modules that module ``name`` imports, at load time or inside a function,
    leaving out imports for type checkers only."""
    path = MODULES[name]
    tree = ast.parse(path.read_text())
    typing_only = {id(inner) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and getattr(node.test, "id", None) == "TYPE_CHECKING"
                   for inner in ast.walk(node)}
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    package = [p for p in package if p]
    found = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[:len(package) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("convsolve"):
            target = node.module.removeprefix("convsolve").lstrip(".")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("convsolve."):
                    found.add(alias.name.removeprefix("convsolve."))
            continue
        else:
            continue
        for alias in node.names:   # `from . import handle` imports a module, not a name
            submodule = f"{target}.{alias.name}".lstrip(".")
            found.add(submodule if submodule in MODULES else target)
    return {m for m in found if m in MODULES and m != name}


GRAPH = {name: imports(name) for name in MODULES}


def test_every_module_belongs_to_a_wing():
    """Each core module's top-level name is a wing's, so its place in the order is known."""
    unknown = sorted(n for n in MODULES if (n.split(".")[0] if n else "__init__") not in RANK)
    assert not unknown, f"add these to WINGS here and to docs/architecture.md: {unknown}"


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n))
def test_module_imports_only_its_wing_or_lower(name):
    """Each import of a core module names a module of the same or a lower wing."""
    higher = sorted(m for m in GRAPH[name] if wing_rank(m) > wing_rank(name))
    assert not higher, f"convsolve.{name} imports higher wings: {higher}"


def test_no_import_cycles():
    """No module reaches itself through the imports of others (Tarjan's strongly connected
    components, imports inside functions included)."""
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in GRAPH[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in GRAPH:
        if node not in index:
            visit(node)
    assert not cycles, f"import cycles: {cycles}"


def test_the_checks_see_a_planted_cycle_and_a_climb(monkeypatch):
    """The graph the checks read holds the real imports: engine.benchmark imports engine.worker,
    and a reverse arrow from worker to benchmark would be a cycle (the shape the worker split
    removed)."""
    assert "engine.worker" in GRAPH["engine.benchmark"]
    assert "engine.benchmark" in GRAPH["engine.worker_main"]
    assert "engine.benchmark" not in GRAPH["engine.worker"]
    monkeypatch.setitem(GRAPH, "engine.worker", GRAPH["engine.worker"] | {"engine.benchmark"})
    with pytest.raises(AssertionError, match="import cycles"):
        test_no_import_cycles()
    monkeypatch.setitem(GRAPH, "device.handle", GRAPH["device.handle"] | {"engine.run"})
    with pytest.raises(AssertionError, match="higher wings"):
        test_module_imports_only_its_wing_or_lower("device.handle")
