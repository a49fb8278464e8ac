"""implicit_gemm.Wrw: backward weights as a GEMM of dy and the input gathered in place, its
reduction over N * OH * OW split into parts added up in a fixed order."""
from convsolve import Direction

from .solver import ImplicitGemm


class Wrw(ImplicitGemm):
    name = "implicit_gemm.Wrw"
    directions = (Direction.BACKWARD_WEIGHTS,)
