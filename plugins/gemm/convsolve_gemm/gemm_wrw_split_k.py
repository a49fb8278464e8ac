"""gemm.GemmWrwSplitK: backward-weights as one GEMM per group over a whole chunk of images, its
reduction split into slices where the product is short of tiles (split-K)."""
from convsolve import Direction, hookimpl

from .matmul_conv import build_plan, fits_int32, workspace_bytes

#: Estimated fraction of peak: Im2ColGemm's, less the gathering of dy.
WTI = 0.3


class GemmWrwSplitK:
    name = "gemm.GemmWrwSplitK"
    family = "gemm"
    directions = (Direction.BACKWARD_WEIGHTS,)
    dynamic = True

    @hookimpl
    def is_applicable(self, problem):
        return problem.dtype == "float32" and fits_int32(problem, use_columns=True,
                                                         side_by_side=True)

    @hookimpl
    def get_wti(self, problem):
        return WTI

    @hookimpl
    def workspace(self, problem):
        return workspace_bytes(problem, side_by_side=True)

    @hookimpl
    def build_invoker(self, problem, handle):
        return build_plan(problem, handle, use_columns=True, side_by_side=True)
