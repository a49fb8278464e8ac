"""The hooks the Winograd solvers share; each solver module sets its tile size m and numerics.

Every Winograd solver is tunable: its config is the tile shapes of its kernels (the GEMM's
register tile, the transforms' lanes, the work-group size), the default chosen per device class.
"""
from convsolve import Direction, hookimpl

from . import configs, plan

#: The WTI cost model (get_wti), fitted to F(2,3), F(4,3) and F(6,3) forward on ResNet-50's
#: 3x3 layers at batch 8 on an AVX-512 Xeon: the GEMMs' fraction of peak, and the cost of a
#: byte moved in peak flops (about peak / bandwidth to the last-level cache).
GEMM_EFFICIENCY = 0.6
BYTE_COST = 12


class WinogradSolver:
    """F(m x m, 3 x 3) for 3x3 filters at stride 1 and dilation 1, any padding and groups, in
    all three directions.  A solver module subclasses it, setting ``name``, ``m`` and
    ``tolerance`` (README.md has the measurements)."""

    family = "winograd"
    dynamic = True
    directions = tuple(Direction)
    deterministic = True
    #: Non-finite inputs: NaN and inf spread through whole tiles (README.md, "Non-finite
    #: values"); every output the reference has non-finite is non-finite here too.
    nonfinite = "spread"
    m = None

    @property
    def nonfinite_tile(self):
        """The output tile non-finite values may spread over (nonfinite = "spread": within these tiles)."""
        return (self.m, self.m)

    @hookimpl
    def is_applicable(self, problem):
        cpg, kpg = problem.c // problem.groups, problem.k // problem.groups
        return (problem.dtype == "float32" and problem.n > 0 and problem.fil_h == problem.fil_w == 3
                and problem.conv.strides == (1, 1) and problem.conv.dilations == (1, 1)
                and not (cpg == 1 and kpg == 1)    # depthwise: README.md says why
                and plan.fits_int32(plan.geometry(problem, self.m, plan.GPU_CHUNK_BYTES)))  # the largest

    @hookimpl
    def get_wti(self, problem):
        """Half the estimated direct-convolution flops per second over the peak (capped at 1:
        Winograd beats the direct algorithm's flop rate), from a cost model in peak-flop units:
        the GEMMs at GEMM_EFFICIENCY (less for reductions shallower than 32), and every byte
        of transformed data (written and read once) or of the transformed filter (written, read,
        and its transform's scattered stores) at BYTE_COST flops."""
        geo = plan.geometry(problem, self.m)
        channels = geo.in_shape[0] + geo.out_shape[0]
        gemm = 2 * geo.positions * geo.groups * geo.rows * geo.depth * geo.tiles
        efficiency = GEMM_EFFICIENCY * min(1.0, min(geo.depth, geo.rows) / 32)
        data = 2 * 4 * geo.positions * channels * geo.tiles
        filters = 6 * 4 * geo.positions * geo.groups * geo.rows * geo.depth
        cost = gemm / efficiency + BYTE_COST * (data + filters)
        return max(0.01, min(1.0, 0.5 * problem.flops / cost))

    @hookimpl
    def workspace(self, problem, handle):
        """The chunks' buffers and the filter's transform, chunks sized for the device
        (plan.chunk_bytes): the figure differs between a CPU and a GPU."""
        return plan.device_geometry(problem, self.m, handle).workspace()

    @hookimpl
    def fused_stages(self, problem):
        """All of it, in every direction: the kernel that writes the output (wino_output for y
        and dx, wino_filter_out for dw, after the last chunk's sum) stores each element once,
        its epilogue applied (backward epilogues are alpha and blend only)."""
        return len(problem.epilogue.stages)

    @hookimpl
    def config_space(self, problem, handle):
        return configs.space(handle)

    @hookimpl
    def default_config(self, problem, handle):
        return configs.default(problem, handle, self.m)

    @hookimpl
    def check_config(self, problem, handle, config):
        return configs.refusals(handle, config)

    @hookimpl
    def build_invoker(self, problem, handle, config):
        return plan.build(problem, handle, self.m, config)

    @hookimpl
    def build_packing(self, problem, handle, config):
        """Forward and backward-data: the filter transform U = G w G^T apart, so that constant
        weights are transformed once per weights version (solver API 2.4)."""
        return plan.build_packing(problem, handle, self.m, config)
