"""gemm.Im2ColGemm: any convolution as im2col (or col2im) around grouped GEMMs, in image chunks."""
from convsolve import Direction

from .solver import GemmSolver


class Im2ColGemm(GemmSolver):
    name = "gemm.Im2ColGemm"
    directions = tuple(Direction)
    #: Estimated fraction of peak: GEMM speed less the unfolding traffic.
    wti = 0.35
