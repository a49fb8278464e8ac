"""The hooks the GEMM solvers share, over plan.py's invokers; each solver sets flags and WTI.

Every GEMM solver is tunable: its config is its GEMM kernel's (configs.py's CPU_SPACE or
GPU_SPACE), the default one chosen per device class and product shape."""
from convsolve import Direction, hookimpl

from . import configs, plan
from .plan import fits_int32, main_product, merges_images, workspace_bytes


class GemmSolver:
    """A convolution as grouped GEMMs (plan.py), through column matrices or not. A solver
    subclasses it, setting ``name``, ``directions``, ``wti`` and ``side_by_side``, and where it
    differs, ``uses_columns`` and ``applies_to``."""

    family = "gemm"
    dynamic = True
    #: Every spatial rank, channels-first (solver API 2.5): 2-D unfolds through im2col.cl and
    #: col2im.cl, ranks 1 and 3 through unfold_nd.cl (conv_layout.Columns).
    spatial_dims = (1, 2, 3)
    #: Estimated fraction of peak (the get_wti hook).
    wti = None
    #: Backward-weights only: a chunk's images side by side, one split reduction per group.
    side_by_side = False

    def uses_columns(self, problem):
        """Whether ``problem`` goes through column matrices (im2col, col2im, the workspace)."""
        return True

    def applies_to(self, problem):
        """The solver's own condition on ``problem``, checked before the common ones."""
        return True

    @hookimpl
    def is_applicable(self, problem):
        return (problem.dtype == "float32" and self.applies_to(problem)
                and fits_int32(problem, self.uses_columns(problem), self.side_by_side))

    @hookimpl
    def get_wti(self, problem):
        return self.wti

    @hookimpl
    def workspace(self, problem):
        if not self.uses_columns(problem):
            return 0
        return workspace_bytes(problem, self.side_by_side)

    @hookimpl
    def fused_stages(self, problem):
        """All of it, in every direction and spatial rank: in the store of the kernel after
        which each output element is final (plan.py: the GEMM, whose rows are output channels
        in every channels-first rank, col2im or the split sum); none for backward-data through
        columns in ranks 1 and 3, whose col2im (unfold_nd.cl) stores no epilogue."""
        if (problem.direction is Direction.BACKWARD_DATA and problem.spatial_dims != 2
                and self.uses_columns(problem)):
            return 0
        return len(problem.epilogue.stages)

    @hookimpl
    def config_space(self, problem, handle):
        return configs.space(handle)

    @hookimpl
    def default_config(self, problem, handle):
        columns, trans_a = self.uses_columns(problem), problem.direction is Direction.BACKWARD_DATA
        merged = configs.smallest(handle, trans_a)
        if merges_images(problem, columns, merged, handle):
            return merged
        m, n, batch = main_product(problem, columns, self.side_by_side)
        return configs.default(handle, m, n, batch, trans_a)

    @hookimpl
    def check_config(self, problem, handle, config):
        return configs.refusals(config, handle.device)

    @hookimpl
    def build_invoker(self, problem, handle, config):
        return plan.build(problem, handle, config, self.uses_columns(problem), self.side_by_side)
