"""gemm.Gemm1x1: 1x1 filters without padding as grouped GEMMs, channels-first or channels-last,
in every spatial rank; strided inputs are gathered first."""
from convsolve import ALL_LAYOUTS, Direction, Problem, hookimpl

from . import channels_last, configs
from .solver import GemmSolver


class Gemm1x1(GemmSolver):
    name = "gemm.Gemm1x1"
    directions = tuple(Direction)
    #: Channels-first (plan.py), and channels-last x and y (channels_last.py, 3-D at depth
    #: stride 1); w in either, one memory order for 1x1.
    layouts = ALL_LAYOUTS
    #: Estimated fraction of peak: a plain GEMM with no unfolding (stride 1)...
    wti = 0.5
    #: ...times this when strided inputs are gathered first.
    strided_factor = 0.8

    def uses_columns(self, problem):
        """Strided inputs are gathered into column matrices (NHWC: a pixel matrix); at stride
        1, x itself serves."""
        return any(stride > 1 for stride in problem.conv.strides)

    def applies_to(self, problem):
        """1x1, unpadded, x and y in one layout."""
        return (all(size == 1 for size in problem.fil_sizes)
                and all(pads == (0, 0) for pads in problem.conv.pads)
                and problem.x.layout == problem.y.layout)

    @hookimpl
    def is_applicable(self, problem):
        if not channels_last.serves(problem):
            return super().is_applicable(problem)
        return (problem.dtype == "float32" and self.applies_to(problem)
                and channels_last.plannable(problem)
                and channels_last.fits_int32(channels_last.planar(problem)))

    @hookimpl
    def get_wti(self, problem):
        return self.wti * (self.strided_factor if self.uses_columns(problem) else 1.0)

    @hookimpl
    def workspace(self, problem, handle):
        """Channels-last: the gathered pixels of a strided problem and, on GPUs, backward-weights'
        partial dW (channels_last.splits); channels-first: GemmSolver's."""
        if channels_last.serves(problem):
            return channels_last.workspace_bytes(channels_last.planar(problem),
                                                 channels_last.splits(handle))
        return super().workspace(problem)

    @hookimpl
    def fused_stages(self, problem):
        """Channels-first x and y: GemmSolver's (all of it, in every rank); channels-last
        ones none: their GEMM's rows are pixels, not channels (channels_last.py), so the core's
        pass applies the epilogue."""
        return 0 if channels_last.serves(problem) else super().fused_stages(problem)

    @hookimpl
    def default_config(self, problem, handle):
        if channels_last.serves(problem):
            return configs.default(handle, *channels_last.main_product(
                channels_last.planar(problem), channels_last.splits(handle)))
        return super().default_config(problem, handle)

    @hookimpl
    def build_invoker(self, problem, handle, config):
        if channels_last.serves(problem):
            return channels_last.build(channels_last.planar(problem), handle, config)
        return super().build_invoker(kcrs_weights(problem), handle, config)


def kcrs_weights(problem):
    """``problem`` with its 1x1 weights described as channels-first (KCRS in 2-D), its epilogue
    kept: the channels-last memory order is the same, and im2col's conv arguments
    (Problem.kernel_args) describe 2-D NCHW problems only."""
    p = problem
    if not p.w.channels_last:
        return p
    return Problem.convolution(p.x.shape, p.w.shape, p.conv.strides, p.conv.pads,
                               p.conv.dilations, p.groups, p.direction, p.dtype, p.epilogue)
