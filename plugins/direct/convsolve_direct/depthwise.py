"""direct.Depthwise: depthwise convolutions (groups = C, any multiplier), all three directions,
from zero-padded windows a work-group stages in local memory (STAGE 1), read where they lie by
each work-item (STAGE 0: CPUs, and GPUs' backward passes) or, forward on GPUs, held in a
work-item's registers a row at a time (STAGE 2; kernels/depthwise.cl), the output's epilogue
fused into its stores."""
import numpy as np
from convsolve import ConfigSpace, Direction, ceil_div, hookimpl, round_up

from . import configs
from .configs import fixed_choices, fixed_default, pick_default, work_group_reasons
from .plan import KERNELS, Partials, enqueue, filter_defines, set_args, set_sizes
from .solver import DirectSolver

#: Floats of local memory for the staged window (depthwise.cl's LDS): at most 32 KiB (inside an
#: L1 data cache of 48 KiB and a GPU's 48 KiB of local memory), less where the device has less
#: (lds_floats).  is_applicable declines problems whose smallest tile (one row, one vector)
#: needs more than MIN_LDS: the 32 KiB every OpenCL device has, less the group's sums.
LDS = 8192
MIN_LDS = 4096
#: Outputs a work-group computes at least: on small images it takes its tile of several
#: channel planes in turn (PG), so that groups are not mostly launch overhead.
GROUP_OUTPUTS = 4096
#: ... but on a GPU never so many planes a group that the launch has fewer than this many groups
#: a compute unit: merged planes run one after another in their group, so 4096 outputs a group
#: left backward-data of small strided images to 2-10 groups on a 132-unit GPU (the staged
#: dw_bwd, which serves filters other than 3x3, 5x5 and 7x7 there): 0.22-0.50 ms where direct.Tiled
#: took 0.04 (NVIDIA H100, 2026-12-06 collections; the worst picks of the GPU model).
GPU_GROUPS_PER_UNIT = 4
#: The same for the unstaged kernels' groups (of one work-item on CPUs; GPUs' groups of WG
#: items exceed it with one plane an item): with 4096,
#: MobileNet-v2's 14x14 stride-2 layer makes 56 groups, and PoCL then ran a call on one core
#: as often as on two (0.87-1.5 ms a run against 0.45); with 256 every run took 0.45-0.46 ms,
#: within 3% of a hot loop's time, on that layer and the 7x7-56x56 ones (2-vCPU AMD EPYC, PoCL
#: 3.1, 2026-12-05).
UNSTAGED_GROUP_OUTPUTS = 256
#: Rows per partial tile of backward-weights at least: each tile re-reads (R - 1) * DIL_H rows.
MIN_PARTIAL_ROWS = 8
#: Work units a channel's partial tile counts for: plan.Partials.plan wants TARGET_UNITS / (C *
#: PARTIAL_UNITS) tiles (1,024 tiles x channels), across images where the batch has more images
#: than that.  With 4, MobileNet-v2's backward weights at batch 32 took 3.72 ms (`convsolve
#: bench`, the network) against 4.01-4.03 with 1; of the shares 1, 2, 4 and 8 on fifteen
#: depthwise layers, 4 was the fastest on 7, 2 and 8 within 10% of it on 10 and 11, 1 on 3
#: (NVIDIA H100, 2026-12-07; BENCHMARKS.md "Session 61").
PARTIAL_UNITS = 4
#: Estimated efficiency: the fraction of the device's copy bandwidth it reaches (it is
#: bandwidth-bound), which puts it first among the solvers of a depthwise problem (README).
WTI = 0.6
KERNEL = {Direction.FORWARD: "dw_fwd", Direction.BACKWARD_DATA: "dw_bwd",
          Direction.BACKWARD_WEIGHTS: "dw_wrw"}
#: STAGE = 0: the work-item reads its inputs where they lie, no window staged (CPUs); backward-data
#: at stride 1 and multiplier 1 as a forward pass over dy (reversed_forward), else through
#: dw_bwd_rows, which needs the filter size compiled in (FIXED).
UNSTAGED = {Direction.FORWARD: "dw_fwd_rows", Direction.BACKWARD_DATA: "dw_bwd_rows",
            Direction.BACKWARD_WEIGHTS: "dw_wrw_rows"}
#: The values of STAGE: read where they lie (UNSTAGED), staged in local memory (KERNEL), or the
#: forward window in registers (dw_fwd_regs: a tile of TH rows x TWV single floats a work-item;
#: backward-data's reversed forward pass too).
STAGE_LOCAL, STAGE_REGISTERS = 1, 2
#: dw_fwd_regs' tile: outputs a work-item accumulates at most, and the widest window row it reads
#: ((TWV - 1) * stride + the filter's dilated width), both held in registers.
REGISTER_OUTPUTS = 32
REGISTER_ROW = 40


def columns(problem):
    """Output columns a tile row spans: of y (forward, backward-weights) or of one phase of dx
    (backward-data)."""
    if problem.direction is Direction.BACKWARD_DATA:
        return ceil_div(problem.in_w, problem.conv.strides[1])
    return problem.out_w


def window(problem, th, twv, vw):
    """(rows, pitch, floats) of the window a tile of ``th`` rows x ``twv`` vectors of ``vw``
    pixels stages; the pitch is a whole number of vectors."""
    (sh, sw), (dh, dw) = problem.conv.strides, problem.conv.dilations
    if problem.direction is Direction.BACKWARD_DATA:   # dy offsets of all phases' taps
        (pt, _), (pl, _) = problem.conv.pads
        rows = th + (sh - 1 + pt) // sh - (pt - (problem.fil_h - 1) * dh) // sh
        pitch = round_up(twv * vw + (sw - 1 + pl) // sw - (pl - (problem.fil_w - 1) * dw) // sw,
                         vw)
        return rows, pitch, problem.k // problem.c * rows * pitch
    rows = (th - 1) * sh + (problem.fil_h - 1) * dh + 1
    pitch = round_up(twv * vw * sw + (problem.fil_w - 1) * dw, vw)
    return rows, pitch, rows * pitch


def reversed_forward(problem):
    """Whether backward-data ``problem`` is a forward pass over dy with the taps reversed (stride
    1, multiplier 1), which its unstaged form runs through dw_fwd_rows."""
    return (problem.direction is Direction.BACKWARD_DATA and problem.conv.strides == (1, 1)
            and problem.k == problem.c)


def phased_backward(problem):
    """Whether backward-data ``problem`` is one dw_bwd_rows serves unstaged (stride or
    multiplier past 1), which needs the filter size compiled in (FIXED)."""
    return problem.direction is Direction.BACKWARD_DATA and not reversed_forward(problem)


def backward_as_forward(problem):
    """CS_CONV_PARAMS of that forward pass (depthwise.cl, DW_BACKWARD): dy's sizes in, dx's out,
    stride 1, the padding mirrored (negative where the problem's exceeds the filter's reach)."""
    (pt, _), (pl, _) = problem.conv.pads
    dh, dw = problem.conv.dilations
    return tuple(np.int32(v) for v in (
        problem.n, problem.c, problem.out_h, problem.out_w, problem.c, problem.fil_h,
        problem.fil_w, problem.in_h, problem.in_w, problem.groups,
        (problem.fil_h - 1) * dh - pt, (problem.fil_w - 1) * dw - pl, 1, 1, dh, dw))


def staged_planes(handle, planes, tiles, outputs):
    """Planes a work-group of the staged kernels takes in turn, of ``planes`` in all, each cut
    into ``tiles`` tiles of ``outputs`` outputs: enough for GROUP_OUTPUTS on small images, no
    more than keep GPU_GROUPS_PER_UNIT groups a compute unit on a GPU."""
    most = GROUP_OUTPUTS // outputs
    if handle.is_gpu:
        most = min(most, planes * tiles // (GPU_GROUPS_PER_UNIT * handle.device.max_compute_units))
    return max(1, min(planes, most))


def tap_block(problem, config):
    """TB as built: the config's, or the kernel's taps where they are fewer (dw_wrw walks a
    channel's M * R * S taps, dw_wrw_rows R * S a pass), so that no accumulator repeats the last
    tap: with 9, a 1x1 filter did 9 multiply-adds for each one it needs.  Configs whose TB both
    exceed the taps build alike (a tune times them twice; the kernel cache builds once)."""
    taps = problem.fil_h * problem.fil_w
    if config["STAGE"] == STAGE_LOCAL:
        taps *= problem.k // problem.c
    return min(config["TB"], taps)


def sums_floats(config):
    """Floats of local memory the work-group's sums take, counted twice: depthwise.cl's dw_wrw
    and dw_wrw_rows each declare sums[TB * WG], and Oclgrind 21.10 counted both against a
    dw_wrw launch (CL_OUT_OF_RESOURCES, 36,864 of its 32,768 bytes, for every staged
    backward-weights config), so a device whose compiler does the same keeps room for both."""
    return 2 * config["WG"] * config["TB"]


def lds_floats(handle, config):
    """Floats of the staged window on ``handle``'s device: LDS, or what its local memory holds
    beside the sums (sums_floats; a multiple of 64).  Devices with 48 KiB or more keep LDS."""
    room = handle.device.local_mem_size // 4 - sums_floats(config)
    return max(64, min(LDS, room // 64 * 64))


class Depthwise(DirectSolver):
    name = "direct.Depthwise"
    directions = tuple(Direction)
    deterministic = True

    @hookimpl
    def is_applicable(self, problem):
        return (super().is_applicable(problem) and problem.groups == problem.c
                and window(problem, 1, 1, max(configs.DEPTHWISE_CPU_TUNABLES["VW"]))[2]
                <= MIN_LDS)

    @hookimpl
    def get_wti(self, problem):
        return WTI

    @hookimpl
    def workspace(self, problem):
        if problem.direction is not Direction.BACKWARD_WEIGHTS:
            return 0
        return self._partials(problem).workspace

    def _partials(self, problem):
        return Partials.plan(problem, problem.c * PARTIAL_UNITS, MIN_PARTIAL_ROWS,
                             across_images=True)

    @hookimpl
    def fused_stages(self, problem):
        """Forward and backward-data: all of it (one work-item stores each output element once);
        backward-weights: what the reduction's last fold stores (plan.Partials)."""
        if problem.direction is Direction.BACKWARD_WEIGHTS:
            return self._partials(problem).fused_stages(problem)
        return super().fused_stages(problem)

    @hookimpl
    def config_space(self, problem, handle):
        tunables = dict(configs.DEPTHWISE_GPU_TUNABLES if handle.is_gpu
                        else configs.DEPTHWISE_CPU_TUNABLES)
        wrw = problem.direction is Direction.BACKWARD_WEIGHTS
        tunables.update(TB=configs.DEPTHWISE_TAP_BLOCKS if wrw else (9,),
                        FIXED=fixed_choices(problem, configs.DEPTHWISE_SPECIALISED_FILTERS))
        constraints = [f"(TWV - 1) * VW < {columns(problem)}"]   # no wholly idle vector column
        if phased_backward(problem):
            constraints.append("STAGE == 1 or FIXED == 1")   # dw_bwd_rows
        if handle.is_gpu and (problem.direction is Direction.FORWARD or reversed_forward(problem)):
            tunables["STAGE"] += (STAGE_REGISTERS,)
            reach = (problem.fil_w - 1) * problem.conv.dilations[1] + 1
            constraints.append(f"STAGE < {STAGE_REGISTERS} or (VW == 1 and FIXED == 1 and TH * "
                               f"TWV <= {REGISTER_OUTPUTS} and (TWV - 1) * "
                               f"{problem.conv.strides[1]} + {reach} <= {REGISTER_ROW})")
        return ConfigSpace(tunables, constraints + (configs.DEPTHWISE_GPU_CONSTRAINTS
                                                    if handle.is_gpu else []))

    @hookimpl
    def default_config(self, problem, handle):
        def shrink(config):   # fewer rows, then fewer vectors, until tile and space agree
            if self.check_config(problem, handle, config) and config["TH"] > 1:
                return dict(config, TH=config["TH"] // 2)
            if config["TWV"] > 1:
                return dict(config, TWV=config["TWV"] // 2)
            return None
        space = self.config_space(problem, handle)
        narrowest = min(space.params["VW"])

        phased = phased_backward(problem)

        def fitted(key, entry):   # FIXED by the work; narrower vectors for narrow images
            if entry["STAGE"] == STAGE_REGISTERS:   # as given, where its space takes it
                return entry if space.refusal(entry) is None else fitted(key,
                                                                          configs.UNSTAGED_GPU)
            fixed = fixed_default(problem, entry["FIXED"], configs.DEPTHWISE_CPU_FIXED_MIN_OUTPUTS
                                  if key.startswith("cpu") else configs.FIXED_MIN_OUTPUTS)
            vw = entry["VW"]
            if configs.DEPTHWISE_WRW_FIXED and problem.direction is Direction.BACKWARD_WEIGHTS \
                    and 1 in space.params["FIXED"]:
                fixed = 1   # whatever the work, every device class (configs.DEPTHWISE_WRW_FIXED)
            elif key == "gpu" and 1 not in fixed_choices(problem,
                                                         configs.DEPTHWISE_GPU_FIXED_FILTERS):
                fixed = 0
            if phased and not entry["STAGE"]:
                if 1 not in space.params["FIXED"]:   # dw_bwd_rows cannot: the class's staged
                    return fitted(key, dict(configs.DEPTHWISE_DEFAULT_CONFIGS[key], STAGE=1))
                # what dw_bwd_rows needs, on small problems too (one build a filter), and the
                # widest vectors (1.2-1.8x narrower ones on MobileNet-v2's 28x28 to 112x112
                # stride-2 layers, AVX2 EPYC, 2026-12-05)
                fixed, vw = 1, max(space.params["VW"])
            while vw > narrowest and 2 * columns(problem) <= vw:
                vw //= 2
            return dict(entry, VW=vw, FIXED=fixed)
        table = {key: fitted(key, entry) for key, entry in
                 configs.depthwise_defaults(problem, columns(problem),
                                            not phased).items()}
        config = pick_default(table, handle, space, shrink)
        while config and self.check_config(problem, handle, config):
            config = shrink(config)
        return config or next(c for c in space if not self.check_config(problem, handle, c))

    @hookimpl
    def check_config(self, problem, handle, config):
        floats = window(problem, config["TH"], config["TWV"], config["VW"])[2]
        lds = lds_floats(handle, config)
        reasons = work_group_reasons(handle, config["WG"], 4 * (lds + sums_floats(config)))
        if config["STAGE"] == STAGE_LOCAL and floats > lds:
            reasons.append(f"the tile's window of {floats} floats > the {lds} staged in local "
                           "memory")
        return reasons

    @hookimpl
    def build_invoker(self, problem, handle, config):
        defines = {"VW": config["VW"], "WG": config["WG"], "TB": tap_block(problem, config),
                   "LDS": lds_floats(handle, config),
                   **filter_defines(problem, config)}
        wrw = problem.direction is Direction.BACKWARD_WEIGHTS   # its epilogue: the fold's
        reversed_pass = config["STAGE"] != STAGE_LOCAL and reversed_forward(problem)
        if config["STAGE"] != STAGE_LOCAL:
            defines["DW_BACKWARD"] = int(reversed_pass)
        if config["STAGE"] == STAGE_REGISTERS:
            (sh, sw), (dh, dw) = problem.conv.strides, problem.conv.dilations
            defines.update(RT_H=config["TH"], RT_W=config["TWV"], RS_H=sh, RS_W=sw, RD_H=dh,
                           RD_W=dw)
        name = "dw_fwd_regs" if config["STAGE"] == STAGE_REGISTERS else "dw_fwd_rows" \
            if reversed_pass else (KERNEL if config["STAGE"] else UNSTAGED)[problem.direction]
        kernel = handle.build(KERNELS / "depthwise.cl", name,
                              defines if wrw else {**defines, **problem.epilogue_defines()})
        th, twv, vw, wg = config["TH"], config["TWV"], config["VW"], config["WG"]
        pitch = window(problem, th, twv, vw)[1]
        (sh, _), n = problem.conv.strides, problem.n
        if wrw:
            partials = self._partials(problem)
            first_at = set_sizes(kernel, 3, problem, th, twv, pitch, partials.rows,
                                 partials.tiles_per_image, partials.images)
            fold = partials.reducer(handle, problem)

            def invoker(buffers, scratch):
                events = []
                for first, images in partials.chunks(n):
                    kernel.set_arg(first_at, np.int32(first))
                    size = (wg * partials.tiles_per_image,
                            ceil_div(images, partials.images) * problem.c)
                    events.append(enqueue(handle, kernel, size, (wg, 1), buffers.x, buffers.y,
                                          scratch))
                    events.append(fold(buffers.w, scratch, partials.tiles(images), first == 0,
                                       buffers.epilogue_args if first + images == n else None))
                return events
            return invoker
        rows = problem.out_h if problem.direction is Direction.FORWARD else ceil_div(
            problem.in_h, sh)
        outputs = min(rows, th) * min(columns(problem), twv * vw) * (problem.k // problem.c)
        tiles = ceil_div(rows, th) * ceil_div(columns(problem), twv * vw)
        if config["STAGE"] == STAGE_LOCAL:   # a work-group a tile of PG planes
            planes = staged_planes(handle, n * problem.c, tiles, outputs)
            size, local = (wg * tiles, ceil_div(n * problem.c, planes)), (wg, 1)
        else:   # a work-item a tile of PG planes (depthwise.cl's DW_UNSTAGED_ITEM)
            planes = max(1, min(n * problem.c, UNSTAGED_GROUP_OUTPUTS // (outputs * wg)))
            size, local = (round_up(tiles * ceil_div(n * problem.c, planes), wg),), (wg,)
        if reversed_pass:   # dw_fwd_rows(dy, w, dx) over dy's sizes
            values_at = set_args(kernel, 3, (*backward_as_forward(problem),
                                             *map(np.int32, (th, twv, pitch, planes))))

            def unstaged(buffers, scratch):
                return [enqueue(handle, kernel, size, local, buffers.y, buffers.w, buffers.x,
                                values=buffers.epilogue_args, at=values_at)]
            return unstaged
        values_at = set_sizes(kernel, 3, problem, th, twv, pitch, planes)

        def invoker(buffers, scratch):   # dw_fwd(x, w, y), dw_bwd(dx, w, dy) alike
            return [enqueue(handle, kernel, size, local, buffers.x, buffers.w, buffers.y,
                            values=buffers.epilogue_args, at=values_at)]
        return invoker
