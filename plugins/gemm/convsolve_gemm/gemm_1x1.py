"""gemm.Gemm1x1: 1x1 filters without padding as grouped GEMMs; strided inputs are gathered first."""
from convsolve import Direction, hookimpl

from .matmul_conv import build_plan, fits_int32, workspace_bytes

#: Estimated fraction of peak: a plain GEMM with no unfolding (stride 1).
WTI = 0.5


def _strided(problem):
    return problem.conv.strides != (1, 1)


class Gemm1x1:
    name = "gemm.Gemm1x1"
    family = "gemm"
    directions = tuple(Direction)
    dynamic = True

    @hookimpl
    def is_applicable(self, problem):
        return (problem.dtype == "float32" and problem.fil_h == problem.fil_w == 1
                and problem.conv.pads == ((0, 0), (0, 0))
                and fits_int32(problem, use_columns=_strided(problem)))

    @hookimpl
    def get_wti(self, problem):
        return WTI * (0.8 if _strided(problem) else 1.0)

    @hookimpl
    def workspace(self, problem):
        if not _strided(problem):
            return 0
        return workspace_bytes(problem)

    @hookimpl
    def build_invoker(self, problem, handle):
        return build_plan(problem, handle, use_columns=_strided(problem))
