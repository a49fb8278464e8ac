"""direct.Wrw: backward-weights by a deterministic two-stage reduction (kernels/wrw.cl).

Stage 1 (wrw_partial or wrw_taps) writes one partial dW per tile of output rows into the
workspace, stage 2 adds them up in tile order (plan.Partials, which direct.Depthwise's
backward-weights shares), so the result is bitwise the same for any chunking of the batch.  The
last chunk's fold stores dW's epilogue (alpha and blend; alpha only over several chunks).
"""
import numpy as np
from convsolve import ConfigSpace, Direction, ceil_div, hookimpl, round_up, tuning

from . import configs
from .configs import capped, pick_default, work_group_reasons
from .plan import KERNELS, Partials, enqueue, set_sizes
from .solver import DirectSolver

#: The block of work one unit stands for in the tiling rule: 8 output channels x 7 columns.
UNIT_BLOCK = (8, 7)
#: Estimated fraction of peak: as direct.Tiled (README).
WTI = {"few_channels": 0.45, "general": 0.25}


def _units(problem):
    """Work-items per tile of stage 1 with a reference block of UNIT_BLOCK (output channels,
    filter columns): the tiling's measure of parallelism, the same for every config."""
    kb, sb = UNIT_BLOCK
    cpg, kpg = problem.c // problem.groups, problem.k // problem.groups
    return (cpg * problem.fil_h * ceil_div(problem.fil_w, min(sb, problem.fil_w))
            * problem.groups * ceil_div(kpg, min(kb, kpg)))


class Wrw(DirectSolver):
    name = "direct.Wrw"
    directions = (Direction.BACKWARD_WEIGHTS,)
    deterministic = True

    @hookimpl
    def get_wti(self, problem):
        return WTI["few_channels" if problem.c // problem.groups <= 4 else "general"]

    @hookimpl
    def workspace(self, problem):
        return Partials.plan(problem, _units(problem)).workspace

    @hookimpl
    def fused_stages(self, problem):
        """What the reduction's last fold stores (Partials.fused_stages)."""
        return Partials.plan(problem, _units(problem)).fused_stages(problem)

    @hookimpl
    def config_space(self, problem, handle):
        tunables, constraints = ((configs.WRW_GPU_TUNABLES, configs.WRW_GPU_CONSTRAINTS)
                                 if handle.is_gpu else
                                 (configs.WRW_CPU_TUNABLES, configs.WRW_CPU_CONSTRAINTS))
        # wrw_taps needs a filter row within half a vector, its taps adjacent
        taps = [f"TAPS == 0 or ({problem.fil_w} <= VW // 2 and {problem.conv.dilations[1]} == 1)"]
        return ConfigSpace(
            {**tunables, "KB": capped(configs.WRW_CHANNEL_BLOCKS, problem.k // problem.groups),
             "SB": capped(configs.WRW_COLUMN_BLOCKS, problem.fil_w)}, constraints + taps)

    @hookimpl
    def default_config(self, problem, handle):
        space = self.config_space(problem, handle)
        taps = dict(tuning.pick(configs.WRW_DEFAULT_CONFIGS, handle.device),
                    **configs.WRW_TAPS_CONFIG, TAPS=1)
        taps["KB"] = max(v for v in space.params["KB"] if v <= taps["KB"])
        if space.refusal(taps) is None and 4 * problem.fil_w >= 3 * taps["VW"] // 2:
            return taps   # filter rows filling 3/4 of a half vector or more: along the taps

        def shrink(config):
            if config["SB"] > 1:
                return dict(config, SB=max(v for v in space.params["SB"] if v < config["SB"]))
            return dict(config, KB=config["KB"] // 2) if config["KB"] > 1 else None
        return pick_default(configs.WRW_DEFAULT_CONFIGS, handle, space, shrink)

    @hookimpl
    def check_config(self, problem, handle, config):
        return work_group_reasons(handle, config["WGX"])

    @hookimpl
    def build_invoker(self, problem, handle, config):
        partials = Partials.plan(problem, _units(problem))
        defines = {name: config[name] for name in ("VW", "KB", "SB")}
        taps = config["TAPS"]
        kernel = handle.build(KERNELS / "wrw.cl", "wrw_taps" if taps else "wrw_partial", defines)
        first_at = set_sizes(kernel, 3, problem, partials.rows, partials.tiles_per_image)
        fold = partials.reducer(handle, problem)
        cpg, kpg = problem.c // problem.groups, problem.k // problem.groups
        local = (config["WGX"], 1, 1)
        across = round_up(cpg * (ceil_div(problem.fil_h, 2) if taps else problem.fil_h
                                 * ceil_div(problem.fil_w, config["SB"])), local[0])
        channels = problem.groups * ceil_div(kpg, config["KB"])

        def invoker(buffers, scratch):
            events = []
            for first, images in partials.chunks(problem.n):
                tiles = partials.tiles(images)
                kernel.set_arg(first_at, np.int32(first * partials.tiles_per_image))
                events.append(enqueue(handle, kernel, (across, channels, tiles), local,
                                      buffers.x, buffers.y, scratch))
                events.append(fold(buffers.w, scratch, tiles, first == 0, buffers.epilogue_args
                                   if first + images == problem.n else None))
            return events
        return invoker
