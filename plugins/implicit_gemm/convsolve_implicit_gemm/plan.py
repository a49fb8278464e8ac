"""A problem as the kernels' GEMMs: their shapes, backward data's stride phases, backward weights'
split rule, the workspace, the WTI, and the invoker: the kernel a config picks, its defines,
arguments and launch sizes (and the core's sum of backward weights' splits).  Every spatial rank
is 3-D here, as in the kernels (lifted)."""
import itertools
import math
from importlib import resources

import numpy as np
import pyopencl as cl
from convsolve import Direction, SplitSum, ceil_div, tuning

KERNELS = resources.files(__package__) / "kernels"

DIRECTION_CODES = {Direction.FORWARD: 0, Direction.BACKWARD_DATA: 1,
                   Direction.BACKWARD_WEIGHTS: 2}
#: The kernels' a, b and out (implicit_gemm_common.cl) among the forward-sense buffers, by
#: direction.
ROLES = {Direction.FORWARD: ("w", "x", "y"), Direction.BACKWARD_DATA: ("w", "y", "x"),
         Direction.BACKWARD_WEIGHTS: ("y", "x", "w")}

# {{{ the split rule: backward weights split their reduction over N * OD * OH * OW, and forward
# on GPUs its reduction over C/G * Z * R * S where the output is too few tiles to fill the GPU (a
# layer late in a network at a small batch).  The rule reads the problem and the device, never
# the config, so the workspace does not depend on the config; their partial outputs stay within
# SPLIT_BUDGET_BYTES.
#
# Backward weights split until the splits hold SPLIT_TILES GEMM tiles of SPLIT_TILE x SPLIT_TILE
# (enough work-groups for a large GPU; the values the gemm plugin's GemmWrwSplitK measured on the
# H200), each split at least MIN_SPLIT_DEPTH deep, at most MAX_SPLITS of them by device class.
SPLIT_TILE = 64
SPLIT_TILES = 512
MIN_SPLIT_DEPTH = 256
#: GPUs: as many as SPLIT_TILES asks for.  A dw of one or two tiles (MobileNet-v2's stem and its
#: 1x1 32 -> 16 layer at 112x112, batch 32) ran at 0.55 ms with 64 splits, 0.16 ms with 256 and
#: 0.13-0.14 ms with 512 (cuDNN 0.10-0.12; NVIDIA H100, 2026-12-06, BENCHMARKS.md).  CPUs: 64;
#: on the same layers at batch 8 256 splits took 10-20% longer than 64 (the ResNet-50 stem
#: 12.5-13.6 ms against 11.1-11.3; 2-vCPU Intel Xeon, AVX-512, PoCL 3.1).  The WTI, which sees
#: no device, counts with the "*" entry.
MAX_SPLITS = {"gpu": SPLIT_TILES, "*": 64}
#: Forward splits where its grid of SPLIT_TILE x SPLIT_TILE tiles is under FORWARD_SPLIT_WAVES
#: times the device's compute units, into enough splits for FORWARD_TILES_PER_UNIT tiles a unit,
#: each at least FORWARD_SPLIT_DEPTH[0] deep where the grid is under one tile a unit, else
#: FORWARD_SPLIT_DEPTH[1] (a shallow split of a grid that nearly fills the GPU costs more in
#: partial outputs than it gains), at most MAX_FORWARD_SPLITS by device class: CPUs never
#: (igemm_vector.cl spreads a small output over bands of tiles, and a CPU has few cores to fill).
#: Measured on ResNet-50's 3x3 and late 1x1 layers (NVIDIA H100, 2026-12-06, BENCHMARKS.md): at
#: batch 1 (8-64 tiles) splits of 64 or more took the eleven layers 0.362 ms together, of 128
#: 0.384, of 256 0.459, none 1.77 (cuDNN 0.55); at batch 8 a grid of 224 tiles 512 deep ran 26%
#: slower split 3 ways, grids of 392-400 tiles 1-60% slower split 2 ways, and grids of 56-200
#: tiles 1,024 or more deep 1.07-3.3x faster split.
FORWARD_SPLIT_WAVES = 2
FORWARD_TILES_PER_UNIT = 4
FORWARD_SPLIT_DEPTH = (64, 512)
MAX_FORWARD_SPLITS = {"gpu": SPLIT_TILES, "*": 1}
SPLIT_BUDGET_BYTES = 64 << 20
# }}}

#: WTI: the fraction of peak a full tile reaches, by direction (README.md: the measurements), times
#: the fraction of the tile grid that is useful work for the problem, counted in tiles of WTI_TILE
#: (m, p, j): 32 rows (the CPU's two 16-wide vectors; half a GPU block), 64 columns, 8 deep;
#: times depth / (depth + WTI_DEPTH), the share of a tile's time spent on its reduction rather
#: than on writing C (1x1 layers of 64 channels spend half of it on the stores).
BASE_WTI = {Direction.FORWARD: 0.6, Direction.BACKWARD_DATA: 0.55,
            Direction.BACKWARD_WEIGHTS: 0.5}
WTI_TILE = (32, 64, 8)
WTI_DEPTH = 128
#: ... and times this for 1x1 convolutions without stride or padding: a plain GEMM, which the gemm
#: family runs without the gather's index work (measured here at half gemm.Gemm1x1's speed).
WTI_PLAIN_GEMM = 0.8
#: ... and times this in spatial ranks 1 and 3 (the factors above were measured in 2-D): on
#: R3D-18's layers at batch 1 the CPU kernel took 1.2-2.1x gemm.Im2ColGemm's time forward (0.9x
#: on the stem, 5.6x on a strided 1x1x1 layer), 0.8-3.3x backward data and 1.7-3.2x backward
#: weights (under load), on wav2vec2's feature encoder at batch 4 1.5-3.5x in each direction,
#: winning only its grouped positional convolution (2-vCPU AMD EPYC, Zen 3, AVX2, PoCL 3.1,
#: 2026-12-05; BENCHMARKS.md), so the fallback ranking leaves those to the GEMM family.
WTI_OTHER_RANKS = 0.5
#: ... and times this for forward and backward data where B's tensor (x; backward data: dy) is
#: channels-last: their border tiles take the CPU kernel's general loop (no staged rows), at
#: 0.91-1.01x the channels-first speed on ResNet-50's layers (README.md, Channels-last), and
#: 0.98-2.1x the speed of the channels-first kernel between transposes that served them before
#: (the core's composite, whose WTI is 0.8 times the solver's: TRANSPOSED_WTI), so immediate
#: mode ranks them between the two.  Backward weights with x channels-last ran at 1.06-1.2x its
#: channels-first speed (consecutive taps are consecutive elements of x): unchanged.
WTI_CHANNELS_LAST = 0.9


def useful(size, tile):
    """The fraction of ``ceil(size / tile)`` tiles that ``size`` fills."""
    return size / (ceil_div(size, tile) * tile) if size else 1.0


def phase(a, stride, dilation, pad, filt, size):
    """Backward data along one dimension (implicit_gemm_common.cl's ig_phase): the dx positions
    a + i * stride of phase a and the filter taps that reach them, as (extent, taps)."""
    extent = ceil_div(size - a, stride) if a < size else 0
    first = next((r for r in range(min(filt, stride)) if (a + pad - r * dilation) % stride == 0),
                 None)
    step = next(t for t in range(1, stride + 1) if t * dilation % stride == 0)
    return extent, 0 if first is None else ceil_div(filt - first, step)


def lifted(problem):
    """Per spatial dim, depth, height and width (every problem is 3-D in the kernels: depth and
    height of size 1, no padding, stride and dilation 1 below rank 3 and 2): (input size,
    filter size, output size, (pad before, after), stride, dilation)."""
    c, outer = problem.conv, 3 - problem.spatial_dims
    return [(1, 1, 1, (0, 0), 1, 1)] * outer + list(zip(
        problem.in_sizes, problem.fil_sizes, problem.out_sizes, c.pads, c.strides, c.dilations))


def phases(problem):
    """Backward data's stride phases, each ((extent, taps) of the depth, height and width); one
    phase (the output sizes and the filter's) for the other directions."""
    dims = lifted(problem)
    if problem.direction is not Direction.BACKWARD_DATA:
        return [tuple((out, fil) for _, fil, out, _, _, _ in dims)]
    return list(itertools.product(*[[phase(a, u, dil, lo, fil, size) for a in range(u)]
                                    for size, fil, _, (lo, _), u, dil in dims]))


def conv_args(problem):
    """The kernels' IG_CONV_PARAMS (implicit_gemm_common.cl) of ``problem`` as int32: convsolve.h's
    CS_CONV_PARAMS of its height and width, then its depth's sizes, pad, stride and dilation."""
    (d, z, od, (pf, _), ud, dd), (h, r, oh, (pt, _), uh, dh), (w, s, ow, (pl, _), uw, dw) = \
        lifted(problem)
    return tuple(np.int32(v) for v in (problem.n, problem.c, h, w, problem.k, r, s, oh, ow,
                                       problem.groups, pt, pl, uh, uw, dh, dw,
                                       d, z, od, pf, ud, dd))


def b_last(problem):
    """Whether B's tensor (forward and backward weights: x; backward data: dy) is channels-last:
    then the kernels' digit order puts its channels innermost (implicit_gemm_common.cl)."""
    return (problem.y if problem.direction is Direction.BACKWARD_DATA else problem.x).channels_last


def b_pixel(problem):
    """B's pixel stride in elements (implicit_gemm_common.cl's b_pix): 1 channels-first, its
    tensor's channels channels-last."""
    if not b_last(problem):
        return 1
    return problem.k if problem.direction is Direction.BACKWARD_DATA else problem.c


def b_along_j(problem):
    """Whether igemm_local.cl loads B along the reduction (backward weights: pixels of dy and x;
    forward and backward data: channels of a channels-last B), so its loads are coalesced."""
    return (problem.direction is Direction.BACKWARD_WEIGHTS) != b_last(problem)


def gemm_m(problem):
    """Rows of C: output channels per group (backward data: input channels per group)."""
    g = problem.groups
    return (problem.c if problem.direction is Direction.BACKWARD_DATA else problem.k) // g


def _extent(phase_):
    """Output pixels of a phase (phases)."""
    return math.prod(extent for extent, _ in phase_)


def _taps(phase_):
    """Filter taps reaching a phase (phases)."""
    return math.prod(taps for _, taps in phase_)


def gemm_p(problem):
    """Columns of C in the largest slice: output pixels (backward data: those of the largest
    phase; backward weights: the filter taps C/G * Z * R * S)."""
    if problem.direction is Direction.BACKWARD_WEIGHTS:
        return problem.c // problem.groups * math.prod(problem.fil_sizes)
    return problem.n * max(_extent(p) for p in phases(problem))


def gemm_j(problem, device=None):
    """The reduction's depth in the deepest slice: one split's share of depth(problem) on
    ``device`` (see splits); backward data: K/G times the taps of the phase most reach."""
    if problem.direction is Direction.BACKWARD_DATA:
        return problem.k // problem.groups * max(_taps(p) for p in phases(problem))
    return ceil_div(depth(problem), splits(problem, device))


def tile_width(problem):
    """What igemm_vector.cl cuts into TP-wide tiles: a row of output pixels (backward data: of the
    widest phase), or all filter taps for backward weights."""
    if problem.direction is Direction.BACKWARD_WEIGHTS:
        return gemm_p(problem)
    return max(p[-1][0] for p in phases(problem))


def vector_tiles(problem, tp):
    """igemm_vector.cl's tiles of TP columns in the largest slice: TP-wide runs of each row of
    output pixels (a shorter one ending each row), or of all the filter taps."""
    width = tile_width(problem)
    if problem.direction is Direction.BACKWARD_WEIGHTS or not width:
        return ceil_div(width, tp)
    return gemm_p(problem) // width * ceil_div(width, tp)


def depth(problem):
    """The reduction that splits: backward weights' N * OD * OH * OW, forward's C/G * Z * R * S
    (backward data does not split)."""
    if problem.direction is Direction.BACKWARD_WEIGHTS:
        return problem.n * math.prod(problem.out_sizes)
    return problem.c // problem.groups * math.prod(problem.fil_sizes)


def output(problem):
    """The tensor the kernels write (implicit_gemm_common.cl's C): y, dx or dw."""
    return getattr(problem, ROLES[problem.direction][2])


def splits(problem, device=None):
    """How many parts the reduction is split into on ``device`` (a pyopencl Device; None, the
    WTI's view: MAX_SPLITS's "*" entry for backward weights, no split forward); 1 for backward
    data."""
    forward = problem.direction is Direction.FORWARD
    if problem.direction is Direction.BACKWARD_DATA or (forward and device is None):
        return 1
    most_by_class = MAX_FORWARD_SPLITS if forward else MAX_SPLITS
    most = most_by_class["*"] if device is None else tuning.pick(most_by_class, device)
    m, p = gemm_m(problem), gemm_p(problem)
    tiles = problem.groups * ceil_div(m, SPLIT_TILE) * ceil_div(p, SPLIT_TILE)
    if not tiles:   # a zero batch: no output
        return 1
    wanted, least = SPLIT_TILES, MIN_SPLIT_DEPTH
    if forward and most > 1:
        units = device.max_compute_units
        if tiles >= FORWARD_SPLIT_WAVES * units:
            return 1
        wanted = FORWARD_TILES_PER_UNIT * units
        least = FORWARD_SPLIT_DEPTH[tiles >= units]
    return max(1, min(most, ceil_div(wanted, tiles), depth(problem) // least,
                      SPLIT_BUDGET_BYTES // output(problem).nbytes))


def slices(problem, device=None):
    """The launches' third dimension: groups, times phases or splits."""
    if problem.direction is Direction.BACKWARD_DATA:
        return problem.groups * math.prod(problem.conv.strides)
    return problem.groups * splits(problem, device)


def workspace(problem, device=None):
    """Bytes of workspace: the partial outputs (dw, or y) when the reduction splits; else none."""
    count = splits(problem, device)
    return count * output(problem).nbytes if count > 1 else 0


def wti(problem):
    """BASE_WTI times the useful share of the tile grid and of the tiles' time (every phase's,
    for backward data), in (0, 1]."""
    tm, tp, tj = WTI_TILE
    m, g = gemm_m(problem), problem.groups
    other = (problem.k if problem.direction is Direction.BACKWARD_DATA else problem.c) // g
    work = padded = 0
    for phase_ in phases(problem):
        if problem.direction is Direction.BACKWARD_WEIGHTS:
            p, j = gemm_p(problem), ceil_div(depth(problem), splits(problem))
        else:
            p, j = problem.n * _extent(phase_), other * _taps(phase_)
        work += m * p * j
        padded += (m * p * j / (useful(m, tm) * useful(p, tp) * useful(j, tj))
                   * (j + WTI_DEPTH) / max(j, 1))
    conv = problem.conv
    plain = (set(problem.fil_sizes) == {1} and set(conv.strides) == {1}
             and {side for pad in conv.pads for side in pad} == {0})
    return (BASE_WTI[problem.direction] * (work / padded if padded else 1.0)
            * (WTI_PLAIN_GEMM if plain else 1.0)
            * (WTI_OTHER_RANKS if problem.spatial_dims != 2 else 1.0)
            * (WTI_CHANNELS_LAST if b_last(problem)
               and problem.direction is not Direction.BACKWARD_WEIGHTS else 1.0))


# {{{ the invoker

#: The tunables each kernel reads, as -D defines (configs.CONSTRAINTS pins the others).
LOCAL_TUNABLES = ("BM", "BN", "BK", "TM", "TN", "VW", "DOUBLE_BUF")
VECTOR_TUNABLES = ("VW", "VK", "TP", "MR", "JB")
#: igemm_vector.cl: work-items wanted per compute unit, so that a core slowed by other work is
#: balanced by the others; a work-item takes fewer than MR tiles when that many are not there.
ITEMS_PER_UNIT = 8


def layout_defines(problem):
    """X_LAST, W_LAST, Y_LAST for the channels-last tensors of ``problem`` (none for
    channels-first ones: the .cl defaults, so channels-first builds keep their options)."""
    return {f"{name.upper()}_LAST": 1 for name in "xwy" if getattr(problem, name).channels_last}


def defines(problem, config):
    """The -D defines of ``config``'s kernel for ``problem`` (its direction, its tensors' layouts,
    its epilogue)."""
    names = LOCAL_TUNABLES if config["LOCAL"] else VECTOR_TUNABLES
    return {"DIRECTION": DIRECTION_CODES[problem.direction],
            **{name: config[name] for name in names}, **layout_defines(problem),
            **problem.epilogue_defines()}


def build(problem, handle, config):
    """The invoker of ``problem`` with the kernel ``config`` (complete: configs.complete) picks,
    and for a split reduction the sum of its splits (convsolve.SplitSum)."""
    parts, total = splits(problem, handle.device), output(problem).size
    # the epilogue goes with the kernel that writes the output: the GEMM, or the sum
    kernel, size, local, extra = _kernel(
        problem if parts == 1 else problem.with_epilogue(None), handle, config)
    after = _set_args(kernel, 3, (*conv_args(problem), np.int32(parts), *extra))
    summer = (SplitSum(handle, problem.epilogue).bound(parts, total, channels=_channels(problem))
              if parts > 1 else None)
    a_name, b_name, out_name = ROLES[problem.direction]

    def invoker(buffers, scratch):
        out = getattr(buffers, out_name)
        _set_args(kernel, 0, (getattr(buffers, a_name), getattr(buffers, b_name),
                              out if summer is None else scratch))
        if summer is None and problem.epilogue is not None:
            _set_args(kernel, after, buffers.epilogue_args.kernel_args())
        events = [cl.enqueue_nd_range_kernel(handle.queue, kernel, size, local)]
        if summer is not None:
            events.append(summer(scratch, out, buffers.epilogue_args))
        return events
    return invoker


def _channels(problem):
    """SplitSum's (chans, inner) of the output: a forward y's channel of each element (its epilogue
    has per-channel stages); (1, 1) for dw, whose epilogue takes no channel."""
    if problem.direction is not Direction.FORWARD:
        return 1, 1
    return problem.k, 1 if problem.y.channels_last else math.prod(problem.out_sizes)


def _set_args(kernel, first, values):
    """Set ``kernel``'s arguments from index ``first`` on; the index after them."""
    for index, value in enumerate(values, start=first):
        kernel.set_arg(index, value)
    return first + len(values)


def _kernel(problem, handle, config):
    """The kernel ``config`` picks, built for ``problem``'s direction, with its global and local
    sizes and the arguments it takes after SPLITS."""
    built_with, slices_ = defines(problem, config), slices(problem, handle.device)
    if config["LOCAL"]:
        kernel = handle.build(KERNELS / "igemm_local.cl", "igemm_local", built_with)
        local = (config["BN"] // config["TN"], config["BM"] // config["TM"], 1)
        size = (ceil_div(gemm_p(problem), config["BN"]) * local[0],
                ceil_div(gemm_m(problem), config["BM"]) * local[1], slices_)
        return kernel, size, local, ()
    kernel = handle.build(KERNELS / "igemm_vector.cl", "igemm_vector", built_with)
    tiles = vector_tiles(problem, config["TP"])
    blocks = ceil_div(gemm_m(problem), config["VK"] * config["VW"])
    bands = ceil_div(ITEMS_PER_UNIT * handle.device.max_compute_units, blocks * slices_)
    band = max(1, min(config["MR"], ceil_div(tiles, bands)))
    return kernel, (blocks, max(1, ceil_div(tiles, band)), slices_), (1, 1, 1), (np.int32(band),)

# }}}
