"""convsolve-direct: direct-convolution solvers (the naive ones are the always-correct fallback)."""
from convsolve import hookimpl

from .naive import NaiveBwdData, NaiveBwdWeights, NaiveFwd

__version__ = "0.1.0"
#: Solver API versions this plugin supports.
CONVSOLVE_SOLVER_API = ">=2.1,<3"


@hookimpl
def convsolve_solvers():
    return [NaiveFwd(), NaiveBwdData(), NaiveBwdWeights()]
