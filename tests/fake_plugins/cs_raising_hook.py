"""Test-only plugin whose convsolve_solvers() raises."""
from convsolve import hookimpl


@hookimpl
def convsolve_solvers():
    raise RuntimeError("planted hook failure")
