"""convsolve-implicit-gemm: workspace-free implicit GEMM convolutions in every direction."""
from convsolve import hookimpl

from .bwd_data import BwdData
from .fwd import Fwd
from .wrw import Wrw

__version__ = "0.1.0"
#: Solver API versions this plugin supports.
CONVSOLVE_SOLVER_API = ">=2.5,<3"   # fused_stages (2.3), spatial_dims and layouts (2.5)


@hookimpl
def convsolve_solvers():
    return [Fwd(), BwdData(), Wrw()]
