"""convsolve-direct: direct convolutions: register-tiled (Tiled), depthwise (Depthwise; on
channels-last tensors DepthwiseNhwc), a deterministic two-stage backward-weights (Wrw), and the
naive reference solvers."""
from convsolve import hookimpl

from .depthwise import Depthwise
from .depthwise_nhwc import DepthwiseNhwc
from .naive import NaiveBwdData, NaiveBwdWeights, NaiveFwd
from .tiled import Tiled
from .wrw import Wrw

__version__ = "0.2.0"
#: Solver API versions this plugin supports.
CONVSOLVE_SOLVER_API = ">=2.5,<3"   # fused_stages (2.3), spatial_dims and layouts (2.5)


@hookimpl
def convsolve_solvers():
    return [Tiled(), Depthwise(), DepthwiseNhwc(), Wrw(), NaiveFwd(), NaiveBwdData(),
            NaiveBwdWeights()]
