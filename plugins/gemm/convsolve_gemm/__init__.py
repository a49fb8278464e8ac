"""convsolve-gemm: convolutions as matrix products (1x1, im2col, split-K) on a tuned OpenCL GEMM."""
from convsolve import hookimpl

from .gemm_1x1 import Gemm1x1
from .gemm_wrw_split_k import GemmWrwSplitK
from .im2col_gemm import Im2ColGemm

__version__ = "0.1.0"
#: Solver API versions this plugin supports.
CONVSOLVE_SOLVER_API = ">=2.5,<3"   # fused_stages (2.3), layouts (2.5)


@hookimpl
def convsolve_solvers():
    return [Gemm1x1(), Im2ColGemm(), GemmWrwSplitK()]
