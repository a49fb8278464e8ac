"""direct.Wrw: backward-weights by a deterministic two-stage reduction (kernels/wrw.cl).

The reduction over N * OH * OW is cut into tiles of TR output rows of one image (tiles_per_image
of them); stage 1 writes one partial dW per tile into the workspace, stage 2 (wrw_reduce) adds
them up in tile order, chunk after chunk of images, so the result is bitwise the same for any
chunking.  The tiling reads the problem only (never the config or the device), so the workspace
is exact and config-independent; direct.Depthwise's backward-weights uses the same plan.  The
last chunk's fold stores dW's epilogue (alpha and blend; alpha only over several chunks).
"""
from dataclasses import dataclass

import numpy as np
from convsolve import ConfigSpace, Direction, ceil_div, hookimpl, round_up, tuning

from .common import KERNELS, capped, enqueue, pick_default, set_sizes, work_group_reasons

#: Independent work units (work-items or work-groups) the tiles of a chunk should offer at least:
#: room to balance two CPU cores and a GPU's first wave; more makes tiles short, and each
#: tile costs a horizontal sum per accumulator and a partial dW to write and read back.
TARGET_UNITS = 4096
#: Workspace bound for the partial dWs: the batch goes in chunks of images whose tiles fit it.
BUDGET_BYTES = 64 << 20
#: The block of work one unit stands for in the tiling rule: 8 output channels x 7 columns.
UNIT_BLOCK = (8, 7)
#: Tunables: vector width, output channels (KB) and filter columns (SB) per work-item, and the
#: work-group's size along the first dimension.  SB candidates cover 3-, 5- and 7-wide filters.
CHANNEL_BLOCKS = (1, 2, 4, 8, 16, 24)
COLUMN_BLOCKS = (1, 2, 3, 4, 5, 7)
CPU_SPACE = ({"VW": (8, 16), "WGX": (1, 4), "TAPS": (0, 1)},
             ["KB * SB + KB + SB <= 30 if TAPS == 0 else KB <= 28 and SB == 1"])   # 32 registers
GPU_SPACE = ({"VW": (1, 2, 4), "WGX": (32, 64, 128), "TAPS": (0,)}, ["KB * SB * VW <= 64"])
DEFAULTS = {"cpu/vector16": {"VW": 16, "KB": 2, "SB": 7, "WGX": 1, "TAPS": 0},
            "cpu": {"VW": 8, "KB": 2, "SB": 3, "WGX": 1, "TAPS": 0},   # AVX2: 16 registers
            "gpu": {"VW": 1, "KB": 4, "SB": 4, "WGX": 64, "TAPS": 0},
            "*": {"VW": 4, "KB": 2, "SB": 3, "WGX": 32, "TAPS": 0}}
#: wrw_taps' block where the filter allows it (S <= VW / 2, DIL_W = 1): 16 output channels,
#: 1.5x the other kernel on the ResNet-50 stem (README).
TAPS_DEFAULT = {"KB": 16, "SB": 1}
#: Estimated fraction of peak: as direct.Tiled (README).
WTI = {"few_channels": 0.45, "general": 0.25}
REDUCE_GROUP = 64


@dataclass(frozen=True)
class Partials:
    """How a backward-weights reduction is tiled: TR output rows per tile, tiles_per_image tiles
    per image, images per chunk, and ``count`` partial sums (the size of dW) per tile."""

    rows: int
    tiles_per_image: int
    chunk: int
    count: int

    @classmethod
    def plan(cls, problem, units_per_tile, min_rows=1):
        """The tiling of ``problem``: at least TARGET_UNITS / ``units_per_tile`` tiles (each
        >= ``min_rows`` rows where the image allows), chunks within BUDGET_BYTES."""
        count = problem.w.size
        wanted = ceil_div(TARGET_UNITS, max(1, units_per_tile))
        per_image = min(ceil_div(wanted, problem.n), ceil_div(problem.out_h, min_rows))
        rows = ceil_div(problem.out_h, max(1, per_image))
        per_image = ceil_div(problem.out_h, rows)
        chunk = max(1, min(problem.n, BUDGET_BYTES // (4 * count * per_image)))
        return cls(rows, per_image, chunk, count)

    @property
    def workspace(self):
        return 4 * self.count * self.tiles_per_image * self.chunk

    def chunks(self, n):
        """(first image, images) of each chunk."""
        return [(first, min(self.chunk, n - first)) for first in range(0, n, self.chunk)]

    def fused_stages(self, problem):
        """The stages of ``problem``'s epilogue the last chunk's fold stores: all of them (alpha,
        blend) when the batch is one chunk; alpha only over several, whose first fold
        overwrites dW's prior contents (the core's pass blends then, from scratch)."""
        return len(problem.epilogue.stages) if self.chunk >= problem.n else 1

    def reducer(self, handle, problem, defines=None):
        """fold(buffers.w, scratch, tiles, first, values=None) -> event: stage 2 over one chunk's
        tiles, built from the program of ``defines`` (so that it shares stage 1's build); with
        ``values`` (buffers.epilogue: the last chunk), that fold stores ``problem``'s epilogue
        from a build of its own."""
        kernel = handle.build(KERNELS / "wrw.cl", "wrw_reduce", defines)
        last = kernel if problem.epilogue is None else handle.build(
            KERNELS / "wrw.cl", "wrw_reduce", {**(defines or {}), **problem.epilogue_defines()})
        size = (round_up(self.count, REDUCE_GROUP),)

        def fold(dw, scratch, tiles, first, values=None):
            return enqueue(handle, last if values is not None else kernel, size, (REDUCE_GROUP,),
                           scratch, dw, np.int32(self.count), np.int32(tiles), np.int32(first),
                           values=values, at=5)
        return fold


def _units(problem):
    """Work-items per tile of stage 1 with a reference block of UNIT_BLOCK (output channels,
    filter columns): the tiling's measure of parallelism, the same for every config."""
    kb, sb = UNIT_BLOCK
    cpg, kpg = problem.c // problem.groups, problem.k // problem.groups
    return (cpg * problem.fil_h * ceil_div(problem.fil_w, min(sb, problem.fil_w))
            * problem.groups * ceil_div(kpg, min(kb, kpg)))


class Wrw:
    name = "direct.Wrw"
    family = "direct"
    directions = (Direction.BACKWARD_WEIGHTS,)
    dynamic = True
    deterministic = True

    @hookimpl
    def is_applicable(self, problem):
        return problem.dtype == "float32"

    @hookimpl
    def get_wti(self, problem):
        return WTI["few_channels" if problem.c // problem.groups <= 4 else "general"]

    @hookimpl
    def workspace(self, problem):
        return Partials.plan(problem, _units(problem)).workspace

    @hookimpl
    def fused_epilogue(self, problem):
        """What the reduction's last fold stores (Partials.fused_stages)."""
        return Partials.plan(problem, _units(problem)).fused_stages(problem)

    @hookimpl
    def config_space(self, problem, handle):
        params, constraints = GPU_SPACE if handle.is_gpu else CPU_SPACE
        # wrw_taps needs a filter row within half a vector, its taps adjacent
        taps = [f"TAPS == 0 or ({problem.fil_w} <= VW // 2 and {problem.conv.dilations[1]} == 1)"]
        return ConfigSpace({**params, "KB": capped(CHANNEL_BLOCKS, problem.k // problem.groups),
                            "SB": capped(COLUMN_BLOCKS, problem.fil_w)}, constraints + taps)

    @hookimpl
    def default_config(self, problem, handle):
        space = self.config_space(problem, handle)
        taps = dict(tuning.pick(DEFAULTS, handle.device), **TAPS_DEFAULT, TAPS=1)
        taps["KB"] = max(v for v in space.params["KB"] if v <= taps["KB"])
        if space.refusal(taps) is None and 4 * problem.fil_w >= 3 * taps["VW"] // 2:
            return taps   # filter rows filling 3/4 of a half vector or more: along the taps
            return taps

        def shrink(config):
            if config["SB"] > 1:
                return dict(config, SB=max(v for v in space.params["SB"] if v < config["SB"]))
            return dict(config, KB=config["KB"] // 2) if config["KB"] > 1 else None
        return pick_default(DEFAULTS, handle, space, shrink)

    @hookimpl
    def check_config(self, problem, handle, config):
        return work_group_reasons(handle, config["WGX"])

    @hookimpl
    def build_invoker(self, problem, handle, config):
        plan = Partials.plan(problem, _units(problem))
        defines = {name: config[name] for name in ("VW", "KB", "SB")}
        taps = config["TAPS"]
        kernel = handle.build(KERNELS / "wrw.cl", "wrw_taps" if taps else "wrw_partial", defines)
        set_sizes(kernel, 3, problem, plan.rows, plan.tiles_per_image)
        fold = plan.reducer(handle, problem, defines)
        cpg, kpg = problem.c // problem.groups, problem.k // problem.groups
        local = (config["WGX"], 1, 1)
        across = round_up(cpg * (ceil_div(problem.fil_h, 2) if taps else problem.fil_h
                                 * ceil_div(problem.fil_w, config["SB"])), local[0])
        channels = problem.groups * ceil_div(kpg, config["KB"])

        def invoker(buffers, scratch):
            events = []
            for first, images in plan.chunks(problem.n):
                tiles = images * plan.tiles_per_image
                kernel.set_arg(3 + 16 + 2, np.int32(first * plan.tiles_per_image))
                events.append(enqueue(handle, kernel, (across, channels, tiles), local,
                                      buffers.x, buffers.y, scratch))
                events.append(fold(buffers.w, scratch, tiles, first == 0, buffers.epilogue
                                   if first + images == problem.n else None))
            return events
        return invoker
