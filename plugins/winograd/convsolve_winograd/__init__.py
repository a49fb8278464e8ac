"""convsolve-winograd: Winograd F(2x2, 3x3), F(4x4, 3x3) and F(6x6, 3x3) in all three directions."""
from convsolve import hookimpl

from .f2x3 import F2x3
from .f4x3 import F4x3
from .f6x3 import F6x3

__version__ = "0.1.0"
#: Solver API versions this plugin supports.
CONVSOLVE_SOLVER_API = ">=2.6,<3"   # fused_stages (2.3), build_packing (2.4), workspace(handle) (2.6)


@hookimpl
def convsolve_solvers():
    return [F2x3(), F4x3(), F6x3()]
