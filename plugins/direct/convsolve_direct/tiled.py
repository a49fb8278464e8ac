"""direct.Tiled: register-tiled direct convolution, forward and backward-data (kernels/tiled.cl),
the output's epilogue fused into its stores."""
import numpy as np
from convsolve import ConfigSpace, Direction, ceil_div, hookimpl, round_up, tuning

from .common import (
    KERNELS,
    capped,
    enqueue,
    filter_defines,
    fixed_choices,
    fixed_default,
    set_sizes,
    snapped,
    work_group_reasons,
)

#: Block sizes tried along each axis: channels per work-item (KB, capped at the channels per
#: group), rows (RB) and vectors per row (VN).
CHANNEL_BLOCKS = (1, 2, 4, 8, 16, 24, 32)
ROW_BLOCKS = (1, 2, 3, 4)
#: The tuning spaces as data.  CPUs: wide vectors (PoCL emits 512-bit code only for explicit
#: float16 vectors, AVX2 takes float8), one-item or small work-groups, accumulators within the
#: 32 registers of AVX-512 (KB * RB * VN vectors; AVX2's 16 are the default table's business).
#: GPUs: narrow vectors, work-groups of 32-256 items whose filters are staged in local memory.
CPU_PARAMS = {"VW": (8, 16), "VN": (1, 2), "WGX": (1, 2, 4), "WGY": (1, 4), "USE_LOCAL": (0,)}
CPU_CONSTRAINTS = ["KB * RB * VN <= 28", "KB * RB * VN >= 4"]
GPU_PARAMS = {"VW": (1, 2, 4), "VN": (1, 2), "WGX": (8, 16, 32, 64), "WGY": (1, 2, 4, 8),
              "USE_LOCAL": (0, 1)}
GPU_CONSTRAINTS = ["KB * RB * VN * VW <= 64", "KB * RB * VN * VW >= 8",
                   "32 <= WGX * WGY <= 256"]
#: Device-class defaults (the hooks' contract: an AVX-512 CPU gets 16-wide vectors, an AVX2 one
#: 8-wide).  The stem and 3x3 layers measured best with 16 channels x 1 row on AVX-512 (README).
DEFAULTS = {
    "cpu/vector16": {"VW": 16, "VN": 1, "RB": 1, "KB": 16, "WGX": 1, "WGY": 1, "USE_LOCAL": 0,
                     "FIXED": 1},
    "cpu": {"VW": 8, "VN": 1, "RB": 1, "KB": 8, "WGX": 1, "WGY": 1, "USE_LOCAL": 0, "FIXED": 1},
    "gpu": {"VW": 1, "VN": 1, "RB": 4, "KB": 8, "WGX": 16, "WGY": 4, "USE_LOCAL": 1, "FIXED": 1},
    "*": {"VW": 4, "VN": 1, "RB": 2, "KB": 4, "WGX": 8, "WGY": 4, "USE_LOCAL": 0, "FIXED": 1},
}
#: Floats of local memory for staged filters (tiled.cl's LW_CAP); a config with USE_LOCAL = 1
#: needs one channel's block, KB * R * S of them, to fit.
LW_CAP = 4096
#: Estimated fraction of peak (WTI): measured 0.35-0.5 with few input channels (the stem), less
#: elsewhere (README); depthwise problems belong to direct.Depthwise.
WTI = {"few_channels": 0.45, "general": 0.3, "depthwise": 0.05}


def _columns(problem):
    """Output columns a work-item's vectors run along: of y, or of one phase of dx."""
    if problem.direction is Direction.FORWARD:
        return problem.out_w
    return ceil_div(problem.in_w, problem.conv.strides[1])


def _members(problem):
    """Channels a work-item's block holds: output channels (forward) or input channels
    (backward-data) of one group."""
    forward = problem.direction is Direction.FORWARD
    return (problem.k if forward else problem.c) // problem.groups


class Tiled:
    name = "direct.Tiled"
    family = "direct"
    directions = (Direction.FORWARD, Direction.BACKWARD_DATA)
    dynamic = True

    @hookimpl
    def is_applicable(self, problem):
        return problem.dtype == "float32"

    @hookimpl
    def get_wti(self, problem):
        if problem.groups == problem.c and problem.groups > 1:
            return WTI["depthwise"]
        return WTI["few_channels" if problem.c // problem.groups <= 4 else "general"]

    @hookimpl
    def workspace(self, problem):
        return problem.w.nbytes   # the filters re-laid with the channel blocks innermost

    @hookimpl
    def fused_epilogue(self, problem):
        """All of it, in both directions: one work-item stores each output element once."""
        return len(problem.epilogue.stages)

    @hookimpl
    def config_space(self, problem, handle):
        params, constraints = ((GPU_PARAMS, GPU_CONSTRAINTS) if handle.is_gpu
                               else (CPU_PARAMS, CPU_CONSTRAINTS))
        return ConfigSpace({**params, "RB": ROW_BLOCKS,
                            "KB": capped(CHANNEL_BLOCKS, _members(problem)),
                            "FIXED": fixed_choices(problem)}, constraints)

    @hookimpl
    def default_config(self, problem, handle):
        space = self.config_space(problem, handle)
        wanted = dict(tuning.pick(DEFAULTS, handle.device))
        wanted["FIXED"] = fixed_default(problem, wanted["FIXED"])
        tile = wanted["KB"] * wanted["RB"] * wanted["VN"]   # accumulators the class wants
        config = snapped(space, wanted)
        while config["VW"] > min(space.params["VW"]) and 2 * _columns(problem) <= config["VW"]:
            config["VW"] //= 2                              # narrow images: narrower vectors
        while config["KB"] * config["RB"] * 2 <= tile and config["RB"] < ROW_BLOCKS[-1]:
            config["RB"] = min(ROW_BLOCKS[-1], config["RB"] * 2)   # few channels: more rows

        def shrink(config):   # fewer channels, then fewer rows, until the constraints hold
            if config["KB"] > 1:
                return dict(config, KB=max(v for v in space.params["KB"] if v < config["KB"]))
            return dict(config, RB=config["RB"] - 1) if config["RB"] > 1 else None
        while config is not None and space.refusal(config):
            config = shrink(config)
        return config or next(iter(space))

    @hookimpl
    def check_config(self, problem, handle, config):
        local = 4 * LW_CAP if config["USE_LOCAL"] else 0
        reasons = work_group_reasons(handle, config["WGX"] * config["WGY"], local)
        if config["USE_LOCAL"] and config["KB"] * problem.fil_h * problem.fil_w > LW_CAP:
            reasons.append(f"KB * R * S = {config['KB'] * problem.fil_h * problem.fil_w} "
                           f"filter values > the {LW_CAP} floats staged in local memory")
        return reasons

    @hookimpl
    def build_invoker(self, problem, handle, config):
        forward = problem.direction is Direction.FORWARD
        defines = {name: config[name] for name in ("VW", "VN", "RB", "KB", "USE_LOCAL")}
        defines.update(LW_CAP=LW_CAP, **filter_defines(problem, config),
                       **problem.epilogue_defines())
        conv = handle.build(KERNELS / "tiled.cl", "tiled_fwd" if forward else "tiled_bwd",
                            defines)
        relayout = handle.build(KERNELS / "tiled.cl", "tiled_weights", defines)
        values_at = set_sizes(conv, 3, problem)
        set_sizes(relayout, 3, problem)
        relayout.set_arg(2, np.int32(0 if forward else 1))   # by_input: backward-data's layout
        local = (config["WGX"], config["WGY"], 1)
        pixels = config["VW"] * config["VN"]
        blocks = problem.n * problem.groups * ceil_div(_members(problem), config["KB"])
        if forward:
            size = (round_up(ceil_div(problem.out_w, pixels), local[0]),
                    round_up(ceil_div(problem.out_h, config["RB"]), local[1]), blocks)
        else:   # every phase (qh, qw) of the stride gets its own work-items
            (sh, sw) = problem.conv.strides
            size = (sw * round_up(ceil_div(ceil_div(problem.in_w, sw), pixels), local[0]),
                    sh * round_up(ceil_div(ceil_div(problem.in_h, sh), config["RB"]), local[1]),
                    blocks)
        weights = (round_up(problem.w.size, 64),)

        def invoker(buffers, scratch):   # tiled_fwd(x, wt, y) and tiled_bwd(dx, wt, dy) alike
            return [enqueue(handle, relayout, weights, None, buffers.w, scratch),
                    enqueue(handle, conv, size, local, buffers.x, scratch, buffers.y,
                            values=buffers.epilogue, at=values_at)]
        return invoker
