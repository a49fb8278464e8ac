"""gemm.GemmWrwSplitK: backward-weights as one GEMM per group over a chunk of images, split-K."""
from convsolve import Direction

from .solver import GemmSolver


class GemmWrwSplitK(GemmSolver):
    name = "gemm.GemmWrwSplitK"
    directions = (Direction.BACKWARD_WEIGHTS,)
    #: Estimated fraction of peak: Im2ColGemm's, less the gathering of dy.
    wti = 0.3
    side_by_side = True
