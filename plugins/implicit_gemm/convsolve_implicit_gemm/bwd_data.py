"""implicit_gemm.BwdData: backward data as one dense GEMM per stride phase of dx, skipping the
zero-inserted positions of strided convolutions."""
from convsolve import Direction

from .solver import ImplicitGemm


class BwdData(ImplicitGemm):
    name = "implicit_gemm.BwdData"
    directions = (Direction.BACKWARD_DATA,)
