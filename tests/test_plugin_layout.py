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
