"""gemm.Gemm1x1: 1x1 filters without padding as grouped GEMMs; strided inputs are gathered first."""
from convsolve import Direction, hookimpl

from .solver import GemmSolver


class Gemm1x1(GemmSolver):
    name = "gemm.Gemm1x1"
    directions = tuple(Direction)
    #: Estimated fraction of peak: a plain GEMM with no unfolding (stride 1)...
    wti = 0.5
    #: ...times this when strided inputs are gathered first.
    strided_factor = 0.8

    def uses_columns(self, problem):
        """Strided inputs are gathered into column matrices; at stride 1, x itself serves."""
        return problem.conv.strides != (1, 1)

    def applies_to(self, problem):
        return problem.fil_h == problem.fil_w == 1 and problem.conv.pads == ((0, 0), (0, 0))

    @hookimpl
    def get_wti(self, problem):
        return self.wti * (self.strided_factor if self.uses_columns(problem) else 1.0)
