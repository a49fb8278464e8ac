"""implicit_gemm.Fwd: forward as a GEMM of the weights and the input gathered in place."""
from convsolve import Direction

from .solver import ImplicitGemm


class Fwd(ImplicitGemm):
    name = "implicit_gemm.Fwd"
    directions = (Direction.FORWARD,)
