"""direct.Tiled: register-tiled direct convolution, forward and backward-data (kernels/tiled.cl),
the output's epilogue fused into its stores."""
import numpy as np
from convsolve import ConfigSpace, Direction, ceil_div, hookimpl, round_up, tuning

from . import configs
from .configs import capped, fixed_choices, fixed_default, snapped, work_group_reasons
from .plan import KERNELS, enqueue, filter_defines, set_sizes
from .solver import DirectSolver

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


class Tiled(DirectSolver):
    name = "direct.Tiled"
    directions = (Direction.FORWARD, Direction.BACKWARD_DATA)

    @hookimpl
    def get_wti(self, problem):
        if problem.groups == problem.c and problem.groups > 1:
            return WTI["depthwise"]
        return WTI["few_channels" if problem.c // problem.groups <= 4 else "general"]

    @hookimpl
    def workspace(self, problem):
        return problem.w.nbytes   # the filters re-laid with the channel blocks innermost

    @hookimpl
    def config_space(self, problem, handle):
        tunables, constraints = (
            (configs.TILED_GPU_TUNABLES, configs.TILED_GPU_CONSTRAINTS) if handle.is_gpu
            else (configs.TILED_CPU_TUNABLES, configs.TILED_CPU_CONSTRAINTS))
        return ConfigSpace({**tunables, "RB": configs.TILED_ROW_BLOCKS,
                            "KB": capped(configs.TILED_CHANNEL_BLOCKS, _members(problem)),
                            "FIXED": fixed_choices(problem)}, constraints)

    @hookimpl
    def default_config(self, problem, handle):
        space = self.config_space(problem, handle)
        wanted = dict(tuning.pick(configs.TILED_DEFAULT_CONFIGS, handle.device))
        wanted["FIXED"] = fixed_default(problem, wanted["FIXED"])
        tile = wanted["KB"] * wanted["RB"] * wanted["VN"]   # accumulators the class wants
        config = snapped(space, wanted)
        while config["VW"] > min(space.params["VW"]) and 2 * _columns(problem) <= config["VW"]:
            config["VW"] //= 2                              # narrow images: narrower vectors
        most_rows = configs.TILED_ROW_BLOCKS[-1]
        while config["KB"] * config["RB"] * 2 <= tile and config["RB"] < most_rows:
            config["RB"] = min(most_rows, config["RB"] * 2)   # few channels: more rows

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
                            values=buffers.epilogue_args, at=values_at)]
        return invoker
