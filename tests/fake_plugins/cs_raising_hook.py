"""Test-only plugin whose convsolve_solvers() raises."""
from convsolve import hookimpl

CONVSOLVE_SOLVER_API = ">=2.0,<3"


@hookimpl
def convsolve_solvers():
    raise RuntimeError("planted hook failure")
