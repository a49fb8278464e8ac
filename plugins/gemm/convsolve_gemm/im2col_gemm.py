"""gemm.Im2ColGemm: any convolution as im2col (or col2im) around grouped GEMMs, in image chunks."""
from convsolve import Direction, hookimpl

from .matmul_conv import build_plan, fits_int32, workspace_bytes

#: Estimated fraction of peak: GEMM speed less the unfolding traffic.
WTI = 0.35


class Im2ColGemm:
    name = "gemm.Im2ColGemm"
    family = "gemm"
    directions = tuple(Direction)
    dynamic = True

    @hookimpl
    def is_applicable(self, problem):
        return problem.dtype == "float32" and fits_int32(problem, use_columns=True)

    @hookimpl
    def get_wti(self, problem):
        return WTI

    @hookimpl
    def workspace(self, problem):
        return workspace_bytes(problem)

    @hookimpl
    def build_invoker(self, problem, handle):
        return build_plan(problem, handle, use_columns=True)
