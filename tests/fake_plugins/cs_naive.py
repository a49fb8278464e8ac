"""Test-only plugin: the direct family's naive reference solvers alone, so that the core's tests
see the same three simple solvers however the direct family grows."""
from convsolve import hookimpl
from convsolve_direct.naive import NaiveBwdData, NaiveBwdWeights, NaiveFwd

CONVSOLVE_SOLVER_API = ">=2.3,<3"   # fused_stages (2.3)


@hookimpl
def convsolve_solvers():
    return [NaiveFwd(), NaiveBwdData(), NaiveBwdWeights()]
