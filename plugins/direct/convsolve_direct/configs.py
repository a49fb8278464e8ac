"""The direct solvers' configs: each solver's tuning space and default configs per device class,
and the helpers that fit a default to a problem and a device."""
from convsolve import ConfigSpace, Direction, tuning

# {{{ shared: compiled-in filters, block sizes, defaults fitted to a space, device checks

#: Filter sizes that may be compiled into their own build (config FIXED = 1, -D FIL_H / FIL_W):
#: the tap loops unroll (3x3: most layers; 7x7: the ResNet stem).  Only these, so that a handful
#: of builds serve every problem.
SPECIALISED_FILTERS = ((3, 3), (7, 7))
#: direct.Depthwise adds 5x5 (EfficientNet's and MobileNet-v3's depthwise layers): compiled in,
#: 5x5 depthwise layers at batch 8 ran 1.4-1.5x faster forward and backward-data at stride 1,
#: 1.4x forward at stride 2, and 2.6x backward-data at stride 2, where the filter compiled in
#: lets dw_bwd_rows replace the staged kernel (EfficientNet-B0's 144 channels at 56x56: 2.19
#: against 5.63 ms; 2-vCPU Intel Xeon, AVX-512, PoCL 3.1, 2026-12-06, BENCHMARKS.md).
DEPTHWISE_SPECIALISED_FILTERS = (*SPECIALISED_FILTERS, (5, 5))
#: direct.Depthwise's backward weights compiles its filter in whatever the work, wherever its
#: space offers it (its output, the filter, never reaches FIXED_MIN_OUTPUTS, and MobileNet-v2's
#: layers at batch 8 do 10-65 MFLOP).  CPUs: on seven of them (32 channels at 112x112 to 960 at
#: 7x7, strided ones too) it took 0.35-0.92x the run-time-taps build's time (2.7 -> 1.1-2.0 ms
#: at 112x112, 0.80 -> 0.55 at 14x14; `scripts/stage_profile.py --directions wrw --batch 8
#: --runs 15 --config FIXED=1`, two rounds, 2-vCPU Intel Xeon, AVX-512, PoCL 3.1, 2026-12-06,
#: BENCHMARKS.md).  GPUs: with it and DEPTHWISE_WRW_GPU's groups, fifteen depthwise layers of
#: MobileNet-v2, EfficientNet-B0 (5x5) and ConvNeXt-T (7x7) at batch 32 took 0.41-1.00x the
#: former entries' time, mostly run-time taps (NVIDIA H100, 2026-12-07).  One build a filter
#: size serves every layer.
DEPTHWISE_WRW_FIXED = True
#: ... but a GPU's default compiles in only these in its other directions (5x5 stays in its
#: tuning space): on
#: EfficientNet-B0's five 5x5 depthwise layers at batch 32, forward and backward-data, 5x5
#: compiled in took 1.1-1.35x the time of the former default on 7 of the 10, 0.88x on one, the
#: same on one, and 0.35x on the stride-2 backward-data layer at 14x14, where it lets
#: dw_bwd_rows replace the staged kernel (NVIDIA H100, driver 580.159.04, 2026-12-06; the
#: phased backward-data rule of depthwise.py keeps that case).
DEPTHWISE_GPU_FIXED_FILTERS = SPECIALISED_FILTERS


#: Default FIXED = 1 only from this much work on (FLOPs, or output elements for bandwidth-bound
#: depthwise layers): below it the unrolled build costs more to compile (0.3-1 s on PoCL) than
#: it saves.
FIXED_MIN_FLOPS = 100e6
FIXED_MIN_OUTPUTS = 1 << 18
#: direct.Depthwise on CPUs from this many outputs on: the filter compiled in took 0.57-0.72x
#: the time of run-time taps on every 3x3 layer measured below FIXED_MIN_OUTPUTS (MobileNet-v2's
#: at batch 1, 47K-150K outputs, forward and backward-data; its 14x14 -> 7x7 stride-2 layer at
#: batch 8, 226K: 0.64x; a 5x5 at batch 1 0.89x), interleaved in one process (2-vCPU Zen 4,
#: AVX-512, PoCL 3.1, 2026-12-07; BENCHMARKS.md "Session 66"); the build (one a filter size and
#: vector width) is paid once a machine, in PoCL's cache.
DEPTHWISE_CPU_FIXED_MIN_OUTPUTS = 1 << 15


def fixed_default(problem, wanted, min_outputs=FIXED_MIN_OUTPUTS):
    """The default FIXED: the device class's wish, for problems with enough work (FLOPs, or
    ``min_outputs`` output elements)."""
    output = getattr(problem, problem.direction.output).size
    return int(bool(wanted) and (problem.flops >= FIXED_MIN_FLOPS or output >= min_outputs))


def fixed_choices(problem, filters=SPECIALISED_FILTERS):
    """The FIXED values a problem's config space offers: 1 only for ``filters``' sizes."""
    return (0, 1) if (problem.fil_h, problem.fil_w) in filters else (0,)


#: A problem extent at most this small joins the block-size candidates itself (3 channels: a
#: block of 3, not 2 + an overlapping 2); larger ones take listed sizes only, so that a few
#: builds serve many problems (blocks past the end are shifted back, see the kernels).
EXACT_BLOCK_LIMIT = 4


def capped(values, limit):
    """``values`` (sorted ints) cut to those <= ``limit``, with ``limit`` itself added when it
    is at most EXACT_BLOCK_LIMIT: block sizes that do not exceed a problem's extent."""
    kept = [v for v in values if v <= limit]
    if limit <= EXACT_BLOCK_LIMIT and limit not in kept:
        kept.append(limit)
    return tuple(sorted(kept)) or (values[0],)


def snapped(space, wanted):
    """``wanted`` (a device-class default) moved onto ``space``: each parameter to the largest
    candidate at most the wanted value (else the smallest candidate)."""
    config = {}
    for name, values in space.params.items():
        below = [v for v in values if v <= wanted[name]]
        config[name] = below[-1] if below else values[0]
    return config


def pick_default(table, handle, space, shrink):
    """The device class's entry of ``table`` snapped onto ``space``; while the result breaks a
    constraint, ``shrink(config)`` returns a smaller one (None: give up, take the space's first)."""
    config = snapped(space, tuning.pick(table, handle.device))
    while config is not None and space.refusal(config):
        config = shrink(config)
    return config if config is not None else next(iter(space))


def work_group_reasons(handle, size, local_bytes=0):
    """Why a work-group of ``size`` items using ``local_bytes`` of local memory cannot run."""
    device, reasons = handle.device, []
    if size > device.max_work_group_size:
        reasons.append(f"work-group of {size} > the device's {device.max_work_group_size}")
    if local_bytes > device.local_mem_size:
        reasons.append(f"{local_bytes} bytes of local memory > the device's "
                       f"{device.local_mem_size}")
    return reasons

# }}}

# {{{ direct.Naive*: the work-group size (WG) alone; the range is rounded up to it (kernels guard
# the tail).  64 suits PoCL's CPU device, 256 a GPU.

NAIVE_SPACE = ConfigSpace({"WG": (32, 64, 128, 256)})
NAIVE_DEFAULT_CONFIGS = {"gpu": {"WG": 256}, "*": {"WG": 64}}

# }}}

# {{{ direct.Tiled

#: Block sizes tried along each axis: channels per work-item (KB, capped at the channels per
#: group), rows (RB) and vectors per row (VN).
TILED_CHANNEL_BLOCKS = (1, 2, 4, 8, 16, 24, 32)
TILED_ROW_BLOCKS = (1, 2, 3, 4)
#: The tuning spaces as data.  CPUs: wide vectors (PoCL emits 512-bit code only for explicit
#: float16 vectors, AVX2 takes float8), one-item or small work-groups, accumulators within the
#: 32 registers of AVX-512 (KB * RB * VN vectors; AVX2's 16 are the default table's business).
#: GPUs: narrow vectors, work-groups of 32-256 items whose filters are staged in local memory.
TILED_CPU_TUNABLES = {"VW": (8, 16), "VN": (1, 2), "WGX": (1, 2, 4), "WGY": (1, 4),
                      "USE_LOCAL": (0,)}
TILED_CPU_CONSTRAINTS = ["KB * RB * VN <= 28", "KB * RB * VN >= 4"]
TILED_GPU_TUNABLES = {"VW": (1, 2, 4), "VN": (1, 2), "WGX": (8, 16, 32, 64),
                      "WGY": (1, 2, 4, 8), "USE_LOCAL": (0, 1)}
TILED_GPU_CONSTRAINTS = ["KB * RB * VN * VW <= 64", "KB * RB * VN * VW >= 8",
                         "32 <= WGX * WGY <= 256"]
#: Device-class defaults (the hooks' contract: an AVX-512 CPU gets 16-wide vectors, an AVX2 one
#: 8-wide).  The stem and 3x3 layers measured best with 16 channels x 1 row on AVX-512 (README).
TILED_DEFAULT_CONFIGS = {
    "cpu/vector16": {"VW": 16, "VN": 1, "RB": 1, "KB": 16, "WGX": 1, "WGY": 1, "USE_LOCAL": 0,
                     "FIXED": 1},
    "cpu": {"VW": 8, "VN": 1, "RB": 1, "KB": 8, "WGX": 1, "WGY": 1, "USE_LOCAL": 0, "FIXED": 1},
    "gpu": {"VW": 1, "VN": 1, "RB": 4, "KB": 8, "WGX": 16, "WGY": 4, "USE_LOCAL": 1, "FIXED": 1},
    "*": {"VW": 4, "VN": 1, "RB": 2, "KB": 4, "WGX": 8, "WGY": 4, "USE_LOCAL": 0, "FIXED": 1},
}

# }}}

# {{{ direct.Depthwise

#: Tuning spaces as data: tile rows (TH), vectors per tile row (TWV), vector width, work-group
#: size (WG) and, for backward-weights, taps accumulated at once (TB).  CPUs: one work-item per
#: group running through the tile with 8- or 16-wide vectors; GPUs: groups of 64-256 items,
#: staged (a tile a group) or not (a tile an item).
DEPTHWISE_CPU_TUNABLES = {"VW": (8, 16), "WG": (1,), "TH": (1, 2, 4, 8, 16),
                          "TWV": (1, 2, 4, 8, 16), "STAGE": (0, 1)}
DEPTHWISE_GPU_TUNABLES = {"VW": (1, 2, 4), "WG": (64, 128, 256), "TH": (1, 2, 4, 8, 16, 32),
                          "TWV": (1, 2, 4, 8, 16, 32, 64), "STAGE": (0, 1)}
DEPTHWISE_GPU_CONSTRAINTS = ["STAGE != 1 or TH * TWV >= WG // 2",   # staged: a cell for most items
                             "WG * TB <= 2048"]   # the group sums of dw_wrw(_rows): 8 KiB at most
DEPTHWISE_TAP_BLOCKS = (4, 9, 16)
#: The staged GPU entry comes from `scripts/stage_profile.py --solvers direct.Depthwise --sweep
#: 24` on six of MobileNet-v2's depthwise layers at batch 32 (NVIDIA H200, 2026-12-05): 4-wide
#: vectors on 32-row tiles, 1.6-4.3x the former VW=1, TH=8, TWV=32 entry.  The AVX-512 entry's
#: 16-row tiles: MobileNet-v2's 3x3 depthwise layers at batch 8 in 0.82-0.97x the time of 8-row
#: ones (14x14 to 112x112, strides 1 and 2, every direction; 1.02-1.03x on the 112x112 stride-1
#: layer, the same at 7x7), interleaved in one process (2-vCPU Zen 4, PoCL 3.1, 2026-12-07;
#: BENCHMARKS.md "Session 66").
DEPTHWISE_DEFAULT_CONFIGS = {
    "cpu/vector16": {"VW": 16, "WG": 1, "TH": 16, "TWV": 8, "TB": 9, "FIXED": 1, "STAGE": 0},
    "cpu": {"VW": 8, "WG": 1, "TH": 8, "TWV": 16, "TB": 9, "FIXED": 1, "STAGE": 0},
    "gpu": {"VW": 4, "WG": 128, "TH": 32, "TWV": 4, "TB": 9, "FIXED": 1, "STAGE": 1},
    "*": {"VW": 4, "WG": 64, "TH": 4, "TWV": 16, "TB": 9, "FIXED": 1, "STAGE": 1}}
#: GPUs, forward and backward-data: the unstaged kernels in groups of 128 items, each item a
#: tile of 2 rows x one 4-wide vector, except forward at stride 1 on images of at least
#: STAGED_GPU_COLUMNS columns, which keeps the staged entry (its window's reuse: 1.2-1.45x the
#: unstaged one on MobileNet-v2's 112- to 28-column layers).  Over ten of its depthwise layers
#: in both directions at batch 32 (`scripts/stage_profile.py --solvers direct.Depthwise --config
#: ...`, BENCHMARKS.md's section "Depthwise on the GPU: a tile a work-item"; NVIDIA H100,
#: 2026-12-06) the unstaged entry ran at 0.96x cuDNN's speed (geometric mean), the staged one at
#: 0.57x; on the strided, 14x14 and 7x7 layers the unstaged one took 0.13-1.05x the staged one's
#: time (1.05x: 384 channels at 14x14, forward).
UNSTAGED_GPU = {"VW": 4, "WG": 128, "TH": 2, "TWV": 1, "TB": 9, "FIXED": 1, "STAGE": 0}
STAGED_GPU_COLUMNS = 28
#: GPUs, forward, wherever the filter can be compiled in (DEPTHWISE_SPECIALISED_FILTERS):
#: dw_fwd_regs, the window in registers, a tile of 4 rows x 2 outputs a work-item in groups of
#: 128.  Of nine register tiles timed on twenty depthwise layers of MobileNet-v2 (3x3),
#: EfficientNet (5x5) and ConvNeXt (7x7) at batch 32, 112x112 to 7x7, strides 1 and 2, it was
#: within 10% of the best on 17 (worst 1.23x), and it took 0.20-0.64x the former defaults' time
#: (staged or unstaged) on every one: 0.90-3.4x cuDNN's speed (`scripts/stage_profile.py
#: --config STAGE=2,...`, NVIDIA H100, driver 580.159.04, 2026-12-07; BENCHMARKS.md "Session 59").
#: Backward-data's reversed pass (stride 1, multiplier 1) takes it too: on the same twenty
#: layers' fourteen stride-1 ones it took 0.15-0.44x the former defaults' time (dw_fwd_rows, a
#: work-item 8 x 4 single floats or 2 rows of a 4-wide vector), within 25% of the best of six
#: register tiles on each (NVIDIA H200, driver 580.159.04, 2026-12-07; BENCHMARKS.md "Session
#: 60").  A window row past REGISTER_ROW (wide dilations) falls back to UNSTAGED_GPU.
REGISTERS_GPU = {"VW": 1, "WG": 128, "TH": 4, "TWV": 2, "TB": 9, "FIXED": 1, "STAGE": 2}
#: Backward-weights' GPU entry: dw_wrw_rows, 4-wide vectors (narrower on images under 4
#: columns) in groups of 128 items, the filter compiled in (DEPTHWISE_WRW_FIXED).  Of six
#: unstaged configs (1-, 2- and 4-wide vectors in groups of 64 and 128, the filter compiled in)
#: timed on MobileNet-v2's ten depthwise layers, EfficientNet-B0's three 5x5 and ConvNeXt-T's two
#: 7x7 at batch 32, it was within 10% of the best on 14 of 15 (1.21x at 28x28 stride 2, where
#: 2-wide vectors won), and took 0.41-1.00x the time of the entries it replaces (groups of 64,
#: single floats under 14 columns, run-time taps below fixed_default's work) on the same tiles
#: (`scripts/stage_profile.py --directions wrw --batch 32 --runs 7 --config VW=..,WG=..,FIXED=1`,
#: NVIDIA H100, driver 580.159.04, 2026-12-07; BENCHMARKS.md "Session 61").
DEPTHWISE_WRW_GPU = {"VW": 4, "WG": 128, "TH": 2, "TWV": 1, "TB": 9, "FIXED": 1, "STAGE": 0}


def depthwise_defaults(problem, problem_columns, forward_rows):
    """The default table of direct.Depthwise for ``problem``, whose tile rows span
    ``problem_columns`` output columns; ``forward_rows``: whether dw_fwd_rows serves it
    unstaged (forward, or backward-data as a reversed forward pass).  GPUs: REGISTERS_GPU where
    dw_fwd_rows would serve and the filter compiles in; the staged or the unstaged entries
    elsewhere."""
    if problem.direction is Direction.BACKWARD_WEIGHTS:
        gpu = DEPTHWISE_WRW_GPU
    elif forward_rows and 1 in fixed_choices(problem, DEPTHWISE_SPECIALISED_FILTERS):
        gpu = REGISTERS_GPU
    elif (problem.direction is Direction.FORWARD and problem.conv.strides == (1, 1)
          and problem_columns >= STAGED_GPU_COLUMNS):
        gpu = DEPTHWISE_DEFAULT_CONFIGS["gpu"]
    else:
        gpu = UNSTAGED_GPU
    return {**DEPTHWISE_DEFAULT_CONFIGS, "gpu": gpu}

# }}}

# {{{ direct.DepthwiseNhwc

#: Tuning spaces as data: channels per vector (VW), pixels along the width per work-item (PX),
#: the launch's work-group size (WG; fixed per config, so PoCL compiles one work-group function
#: per build).  CPUs: wide vectors (float16 is what makes PoCL emit AVX-512 code, float8 AVX2),
#: small groups; GPUs: 1-4 channels per item (neighbouring items read neighbouring channels),
#: groups of 64-256 items.  WG is a launch size only, so it costs no build.
DEPTHWISE_NHWC_CPU_SPACE = ConfigSpace({"VW": (4, 8, 16), "PX": (1, 2, 4, 8),
                                        "WG": (1, 2, 4, 8, 16)})
DEPTHWISE_NHWC_GPU_SPACE = ConfigSpace({"VW": (1, 2, 4), "PX": (1, 2, 4, 8), "WG": (64, 128, 256)})
#: Device-class defaults, fitted to the problem by the solver (narrower vectors where they do
#: not divide the channels, fewer pixels on narrow images).  CPUs: the best of
#: `scripts/stage_profile.py --layout NHWC --sweep 30` on MobileNet-v2's 56x56x144 and 14x14x576
#: layers at batch 8 in every direction (2-vCPU AMD EPYC, Zen 3, AVX2, PoCL 3.1, 2026-12-05,
#: quiet): 16 channels x 8 pixels in work-groups of 2, within 25% of each case's best and
#: 1.5-3.4x the former 8 x 4 x 8; AVX-512 CPUs take it too (unmeasured there).  GPUs: by the
#: same reasoning as direct.Depthwise's (4-wide vectors), unmeasured.
DEPTHWISE_NHWC_DEFAULT_CONFIGS = {"cpu/vector16": {"VW": 16, "PX": 8, "WG": 2},
                                  "cpu": {"VW": 16, "PX": 8, "WG": 2},
                                  "gpu": {"VW": 4, "PX": 2, "WG": 128},
                                  "*": {"VW": 4, "PX": 2, "WG": 64}}

# }}}

# {{{ direct.Wrw

#: Tunables: vector width, output channels (KB) and filter columns (SB) per work-item, and the
#: work-group's size along the first dimension.  SB candidates cover 3-, 5- and 7-wide filters.
WRW_CHANNEL_BLOCKS = (1, 2, 4, 8, 16, 24)
WRW_COLUMN_BLOCKS = (1, 2, 3, 4, 5, 7)
WRW_CPU_TUNABLES = {"VW": (8, 16), "WGX": (1, 4), "TAPS": (0, 1)}
WRW_CPU_CONSTRAINTS = ["KB * SB + KB + SB <= 30 if TAPS == 0 else KB <= 28 and SB == 1"]   # 32 regs
WRW_GPU_TUNABLES = {"VW": (1, 2, 4), "WGX": (32, 64, 128), "TAPS": (0,)}
WRW_GPU_CONSTRAINTS = ["KB * SB * VW <= 64"]
WRW_DEFAULT_CONFIGS = {"cpu/vector16": {"VW": 16, "KB": 2, "SB": 7, "WGX": 1, "TAPS": 0},
                       "cpu": {"VW": 8, "KB": 2, "SB": 3, "WGX": 1, "TAPS": 0},   # AVX2: 16 regs
                       "gpu": {"VW": 1, "KB": 4, "SB": 4, "WGX": 64, "TAPS": 0},
                       "*": {"VW": 4, "KB": 2, "SB": 3, "WGX": 32, "TAPS": 0}}
#: wrw_taps' block where the filter allows it (S <= VW / 2, DIL_W = 1): 16 output channels,
#: 1.5x the other kernel on the ResNet-50 stem (README).
WRW_TAPS_CONFIG = {"KB": 16, "SB": 1}

# }}}
