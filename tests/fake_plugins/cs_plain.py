"""Test-only plugin: cs_fake's fake.Good alone, a forward solver without the fused_stages hook,
so that epilogue tests have a solver whose every epilogue is the core's pass."""
from convsolve import hookimpl
from cs_fake import Good

CONVSOLVE_SOLVER_API = ">=2.0,<3"


@hookimpl
def convsolve_solvers():
    return [Good()]
