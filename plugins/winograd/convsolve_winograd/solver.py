"""The hooks the Winograd solvers share; each solver module sets its tile size m and numerics.

Every Winograd solver is tunable: its config is the tile shapes of its kernels (the GEMM's
register tile, the transforms' lanes, the work-group size), the default chosen per device class.
"""
from convsolve import ConfigSpace, Direction, hookimpl, tuning

from . import plan

#: Default configs by device class (convsolve.tuning.pick): the GEMMs' register tile (TM rows
#: by NV vectors of VW) and row blocks per work-item (MR), the transforms' tiles per work-item
#: (TT), and the work-group size (WG; the GEMMs run in groups of one on CPUs).  The AVX-512 set
#: ("cpu/vector16") equals the .cl files' #ifndef defaults.
DEFAULTS = {
    # AVX-512: 8 x 32 register tiles of float16 (16 zmm accumulators), 16-lane transforms
    "cpu/vector16": {"TM": 8, "VW": 16, "NV": 2, "MR": 16, "TT": 16, "WG": 16},
    # AVX2: 4 x 16 tiles of float8 (8 ymm accumulators, 6 loads per 8 FMAs), 8-lane transforms
    "cpu": {"TM": 4, "VW": 8, "NV": 2, "MR": 16, "TT": 8, "WG": 16},
    # GPUs: scalar work-items in groups of 64 (correct everywhere; not tuned)
    "gpu": {"TM": 4, "VW": 1, "NV": 4, "MR": 1, "TT": 1, "WG": 64},
}
DEFAULTS["*"] = DEFAULTS["cpu"]

#: The tuning spaces, per device type.  TN = VW * NV divides plan.TILE_ALIGN (32) and TT
#: divides TN, so that the workspace does not depend on the config; TM divides the filter's
#: panels (plan.U_PANEL, 16); register tiles stay at 24 vectors or fewer (AVX-512 has 32).
SPACES = {
    "cpu": {"TT": (2, 4, 8, 16), "WG": (1, 16), "TM": (4, 8, 16), "VW": (8, 16),
            "NV": (1, 2, 4), "MR": (1, 4, 16)},
    "gpu": {"TT": (1, 2, 4), "WG": (64, 128, 256), "TM": (2, 4, 8), "VW": (1, 2, 4),
            "NV": (1, 2, 4), "MR": (1, 4)},
}
CONSTRAINTS = ["32 % (VW * NV) == 0", "(VW * NV) % TT == 0", "TM * NV <= 24"]
#: Transform lanes for images of at most this many tiles per row (ResNet's 7x7 and 14x14 layers
#: with F(4,3) and F(6,3)): 16 lanes would be mostly idle there.  One value, not one per width,
#: to keep the number of builds down.
SMALL_RUN = 4


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
                and plan.fits_int32(plan.geometry(problem, self.m)))

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
    def workspace(self, problem):
        return plan.geometry(problem, self.m).workspace()

    @hookimpl
    def fused_epilogue(self, problem):
        """All of it, in every direction: the kernel that writes the output (wino_output for y
        and dx, wino_filter_out for dw, after the last chunk's sum) stores each element once,
        its epilogue applied (backward epilogues are alpha and blend only)."""
        return len(problem.epilogue.stages)

    @hookimpl
    def config_space(self, problem, handle):
        return ConfigSpace(SPACES["gpu" if handle.is_gpu else "cpu"], CONSTRAINTS)

    @hookimpl
    def default_config(self, problem, handle):
        """The device class's config, with SMALL_RUN tiles per transform work-item where a tile
        row has no more (a run never spans two tile rows)."""
        config = dict(tuning.pick(DEFAULTS, handle.device))
        if plan.geometry(problem, self.m).tiles_w <= SMALL_RUN < config["TT"]:
            config["TT"] = SMALL_RUN
        return config

    @hookimpl
    def check_config(self, problem, handle, config):
        largest = handle.device.max_work_group_size
        return [f"work-group of {config['WG']} > the device's {largest}"] \
            if config["WG"] > largest else []

    @hookimpl
    def build_invoker(self, problem, handle, config):
        return plan.build(problem, handle, self.m, config)
