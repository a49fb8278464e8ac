"""The contract is documented: every hook spec appears in docs/hooks.md with its exact signature."""
import inspect
from pathlib import Path

import pytest
from convsolve import hookspecs

DOCS = (Path(__file__).resolve().parents[1] / "docs" / "hooks.md").read_text()
SPECS = [name for name, obj in vars(hookspecs).items()
         if inspect.isfunction(obj) and hasattr(obj, "convsolve_spec")]


def test_required_hooks_are_specs():
    """Every required per-solver hook is a spec, and the plugin hook is too."""
    assert set(hookspecs.REQUIRED_SOLVER_HOOKS) | {"convsolve_solvers"} == set(SPECS)


@pytest.mark.parametrize("name", SPECS)
def test_spec_documented_with_signature(name):
    """docs/hooks.md has a section per spec giving its exact signature."""
    signature = f"def {name}{inspect.signature(getattr(hookspecs, name))}"
    assert f"## {name}\n" in DOCS and signature in DOCS
