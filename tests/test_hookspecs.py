"""The contract is documented: docs/hooks.md embeds what docgen makes of hookspecs.py."""
import inspect
from pathlib import Path

import pytest
from convsolve import hookspecs
from convsolve.cli import docgen

DOCS = (Path(__file__).resolve().parents[1] / "docs" / "hooks.md").read_text()
SPECS = [name for name, obj in vars(hookspecs).items()
         if inspect.isfunction(obj) and hasattr(obj, "convsolve_spec")]


def test_required_hooks_are_specs():
    """Every required, tuning and epilogue per-solver hook is a spec, and the plugin hook is
    too."""
    assert (set(hookspecs.REQUIRED_SOLVER_HOOKS) | set(hookspecs.TUNING_HOOKS)
            | set(hookspecs.EPILOGUE_HOOKS) | set(hookspecs.PACKING_HOOKS)
            | {"convsolve_solvers"} == set(SPECS))


def test_docs_are_generated_from_the_specs():
    """docs/hooks.md holds the text `convsolve hooks` generates, unedited."""
    assert docgen.hooks_markdown() in DOCS


@pytest.mark.parametrize("name", SPECS)
def test_spec_documented_with_signature(name):
    """Each spec has a section giving its exact, annotated signature."""
    assert f"## {name}\n" in DOCS and docgen.signature(getattr(hookspecs, name)) in DOCS


def test_solver_protocol_matches_the_contract():
    """convsolve.Solver declares every required attribute and every required hook."""
    required = {a.name for a in hookspecs.SOLVER_ATTRIBUTES if a.default is hookspecs.REQUIRED}
    assert set(hookspecs.Solver.__annotations__) == required
    assert all(callable(getattr(hookspecs.Solver, hook)) for hook in hookspecs.REQUIRED_SOLVER_HOOKS)

