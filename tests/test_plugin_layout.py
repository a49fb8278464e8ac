"""Every plugin in this repository keeps the shared shape and imports only convsolve's public API."""
import ast
import re
from pathlib import Path

import pytest

PLUGINS = sorted(p for p in (Path(__file__).resolve().parents[1] / "plugins").iterdir()
                 if (p / "pyproject.toml").exists())
ALLOWED_CONVSOLVE = {"convsolve", "convsolve.testing"}


@pytest.mark.parametrize("plugin", PLUGINS, ids=lambda p: p.name)
def test_imports_only_public_convsolve(plugin):
    """Plugins import convsolve and convsolve.testing only, and never another plugin."""
    own = f"convsolve_{plugin.name.strip('_')}"
    for source in plugin.rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0
                     else [])
            for name in names:
                if name.startswith("convsolve"):
                    assert name in ALLOWED_CONVSOLVE or name.split(".")[0] == own, (
                        f"{source}: imports {name}")


@pytest.mark.parametrize("plugin", PLUGINS, ids=lambda p: p.name)
def test_shape_of_a_plugin(plugin):
    """pyproject names convsolve-<family>, depends on convsolve only, registers the entry point."""
    family = plugin.name.strip("_")
    text = (plugin / "pyproject.toml").read_text()
    assert f'name = "convsolve-{family.replace("_", "-")}"' in text
    assert re.search(r'dependencies = \["convsolve[^"]*"\]', text)
    assert f'{family} = "convsolve_{family}"' in text
    assert (plugin / f"convsolve_{family}" / "__init__.py").exists()
    assert "CONVSOLVE_SOLVER_API" in (plugin / f"convsolve_{family}" / "__init__.py").read_text()


def _hooks_added():
    """{hook name: the solver API version that added it}, from hookspecs.py's docstrings."""
    from convsolve import hookspecs
    added = {}
    for name in dir(hookspecs):
        doc = getattr(getattr(hookspecs, name), "__doc__", None) or ""
        found = re.search(r"\.\. versionadded:: ([\d.]+)", doc)
        if found and hasattr(getattr(hookspecs, name), "convsolve_spec"):
            added[name] = found.group(1)
    return added


def _implemented_hooks(package):
    """Names of the functions marked ``@hookimpl`` anywhere in ``package``'s sources."""
    names = set()
    for source in package.rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.FunctionDef) and any(
                    getattr(d, "id", getattr(d, "attr", None)) == "hookimpl"
                    for d in node.decorator_list):
                names.add(node.name)
    return names


def _declared_range(package):
    """The CONVSOLVE_SOLVER_API string of ``package``'s __init__.py."""
    tree = ast.parse((package / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == \
                "CONVSOLVE_SOLVER_API":
            return node.value.value
    raise AssertionError(f"{package}: no CONVSOLVE_SOLVER_API")


def _too_low(spec, hooks, added):
    """The API versions below the newest hook in ``hooks`` that ``spec`` admits."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version
    need = max((Version(added[h]) for h in hooks if h in added), default=Version("1.0"))
    lower = [Version(f"{major}.{minor}") for major in range(need.major + 1) for minor in range(10)]
    return [str(v) for v in lower if v < need and v in SpecifierSet(spec)]


EXAMPLES = Path(__file__).resolve().parents[1] / "docs" / "examples" / "convsolve_examples"


@pytest.mark.parametrize("package", [*(p / f"convsolve_{p.name.strip('_')}" for p in PLUGINS),
                                     EXAMPLES], ids=lambda p: p.name)
def test_declared_api_floor_covers_the_hooks_implemented(package):
    """A plugin's CONVSOLVE_SOLVER_API admits no core older than the newest hook it implements
    (a 2.1 core would refuse a solver with 2.2's fused_epilogue as half-made)."""
    hooks, added = _implemented_hooks(package), _hooks_added()
    assert hooks, f"{package}: no @hookimpl found"
    spec = _declared_range(package)
    assert not _too_low(spec, hooks, added), (
        f"{package.name} declares {spec!r} but implements "
        f"{sorted(h for h in hooks if h in added)}; raise the floor to the newest's version")


def test_the_floor_check_sees_a_low_floor():
    """The check refuses '>=2.1,<3' for a plugin with fused_epilogue (2.2) and accepts '>=2.2'."""
    added = _hooks_added()
    assert added["fused_epilogue"] == "2.2" and added["is_applicable"] == "1.0"
    assert _too_low(">=2.1,<3", {"is_applicable", "fused_epilogue"}, added) == ["2.1"]
    assert _too_low(">=2.2,<3", {"is_applicable", "fused_epilogue"}, added) == []
