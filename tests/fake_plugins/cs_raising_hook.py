"""Test-only plugin whose convsolve_solvers() raises."""
from convsolve import hookimpl

CONVSOLVE_SOLVER_API = ">=1.0,<2"


@hookimpl
def convsolve_solvers():
    raise RuntimeError("planted hook failure")
