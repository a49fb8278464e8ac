"""A Winograd convolution as kernel launches: tile geometry, chunks, workspace layout, invokers."""
from dataclasses import dataclass, replace
from importlib import resources

import numpy as np
import pyopencl as cl
from convsolve import Direction, Packing, ceil_div, round_up

KERNELS = resources.files(__package__) / "kernels"

#: Transformed rows are `pitch` elements apart: the chunk's tiles rounded up to this (every GEMM
#: panel width TN in the config space divides it, so the GEMM never reads past a row and the
#: workspace does not depend on the config), plus ROW_SKEW.
TILE_ALIGN = 32
#: Extra elements per transformed row: rows then start an odd number of 64-byte lines apart and
#: spread over the L1 sets (a pitch of a multiple of 4 KiB would put every row in one set).
ROW_SKEW = 16
#: Rows per panel of the transformed filter U (UPACK in the kernels): the GEMM's TM divides it.
U_PANEL = 16
#: Bytes the per-tile buffers of one chunk may take on a CPU (transformed input and output, or
#: for backward-weights transformed x and dy); the batch is processed in chunks of as many whole
#: tile rows as fit (at least one), so the workspace stays bounded whatever the batch.  8 MiB
#: holds about one ResNet-50 image of a 56x56 layer, so a chunk's data stays in the CPU's caches
#: between the transform, GEMM and output stages.
CHUNK_BYTES = 8 << 20
#: The same on a GPU (at most half the device's largest allocation): there a chunk's product
#: must fill the device, and each chunk costs four launches of host time.  On the H200, ResNet-50's
#: 3x3 128->128 28x28 layer at batch 32 took 2.9 ms in 7 chunks of 8 MiB (the kernels 0.31 ms,
#: the rest the GPU waiting for launches) and 0.43 ms whole (kernels 0.15 ms); README.md.
GPU_CHUNK_BYTES = 256 << 20
#: Backward-weights on a GPU: at most this many parts of a chunk's tiles summed apart (split-K),
#: each of at least MIN_SPLIT_TILES tiles, their copies of S within SPLIT_BYTES.  ResNet-50's
#: 3x3 layers at batch 32 give 36 to 144 work-groups of 64 x 64 for the 132 of an H200.
MAX_SPLITS = 16
MIN_SPLIT_TILES = 128
SPLIT_BYTES = 64 << 20
FLOAT = 4


@dataclass(frozen=True)
class Geometry:
    """The stride-1 correlation a problem is computed as, in the transform's terms.

    Forward and backward-data are  out[n][g * rows + row] = sum_d in[n][g * depth + d] (*) f,
    over `tiles_h x tiles_w` output tiles of m x m per image; backward-weights correlates x with
    dy over the tiles of dy.
    """

    m: int
    direction: Direction
    rows: int          # GEMM rows per group: output channels of the correlation
    depth: int         # GEMM reduction per group: input channels (forward, backward-data)
    groups: int
    in_shape: tuple    # (channels, height, width) of the tensor the input transform reads
    out_shape: tuple   # (channels, height, width) of the tensor the output transform writes
    pads: tuple        # (top, left) of the correlation; negative crops
    tiles_h: int
    tiles_w: int
    batch: int
    budget: int        # bytes of per-tile buffers a chunk may take (chunk_bytes)
    splits: int = 1    # backward-weights: copies of S the local GEMM sums parts of the tiles into

    @property
    def alpha(self):
        return self.m + 2

    @property
    def positions(self):
        return self.alpha ** 2

    @property
    def tiles(self):
        """Tiles of the whole batch."""
        return self.batch * self.tiles_h * self.tiles_w

    @property
    def read_limits(self):
        """Rows and columns of the input tensor the valid outputs read: from -pad on, up to
        out + 2 - pad (at most the tensor's); the transforms read the rest as zero."""
        (_, h, w), (_, ho, wo), (pt, pl) = self.in_shape, self.out_shape, self.pads
        return min(h, ho + 2 - pt), min(w, wo + 2 - pl)

    @property
    def wrw(self):
        return self.direction is Direction.BACKWARD_WEIGHTS

    @property
    def cg_pad(self):
        """Backward-weights: input channels per group rounded up to TILE_ALIGN, the row length
        of a group in the tile-major transformed x and in the weight-gradient sum S."""
        return round_up(self.depth, TILE_ALIGN)

    @property
    def x_row(self):
        """Backward-weights: elements per tile of the tile-major transformed x."""
        return self.groups * self.cg_pad + ROW_SKEW

    @property
    def tile_bytes(self):
        """Workspace bytes one tile takes in a chunk: its transformed input and output (or x
        and dy)."""
        width = self.x_row if self.wrw else self.in_shape[0]
        return self.positions * (width + self.out_shape[0]) * FLOAT

    @property
    def chunk_rows(self):
        """Tile rows per chunk: the batch's tile rows in as few chunks as CHUNK_BYTES allows
        (at least one row each), spread evenly over them."""
        total = self.batch * self.tiles_h
        fit = max(1, self.budget // (self.tile_bytes * self.tiles_w))
        return ceil_div(total, ceil_div(total, fit))

    @property
    def pitch(self):
        """Elements between two transformed rows (TILE_ALIGN, ROW_SKEW)."""
        return round_up(self.chunk_rows * self.tiles_w, TILE_ALIGN) + ROW_SKEW

    @property
    def position_floats(self):
        """Elements of one transform position of the part that does not grow with the chunk:
        the transformed filter U (forward, backward-data; rows padded to panels of U_PANEL) or
        the transformed weight-gradient sum S (backward-weights)."""
        if self.wrw:
            return self.groups * self.rows * self.cg_pad
        return self.groups * round_up(self.rows, U_PANEL) * self.depth

    @property
    def plane(self):
        """Elements between two positions of that part: a position's, plus ROW_SKEW."""
        return self.position_floats + ROW_SKEW

    @property
    def fixed_floats(self):
        """Floats of that part, up to the end of its last position (backward-weights: of S's
        last copy, the copies ``positions * plane`` apart)."""
        return ((self.splits - 1) * self.positions + self.positions - 1) * self.plane \
            + self.position_floats

    @property
    def row_count(self):
        """Transformed rows of a chunk: the input's channels, then the output's, per position."""
        return self.positions * (self.in_shape[0] + self.out_shape[0])

    def workspace(self):
        """Exact workspace bytes.  Forward and backward-data: a chunk's transformed input and
        output rows, then U (last, so that whole-vector reads past a row's tiles stay inside
        the workspace).  Backward-weights: S, the chunk's tile-major x, then its transformed dy
        rows, the last one ending at the chunk's last tile."""
        if self.wrw:
            tiles = self.chunk_rows * self.tiles_w
            return (self.fixed_floats + self.positions * tiles * self.x_row
                    + (self.positions * self.out_shape[0] - 1) * self.pitch + tiles) * FLOAT
        return (self.row_count * self.pitch + self.fixed_floats) * FLOAT

    def chunks(self):
        """(first tile row, tile rows) of each chunk, in order."""
        total, step = self.batch * self.tiles_h, self.chunk_rows
        return [(r0, min(step, total - r0)) for r0 in range(0, total, step)]


def chunk_bytes(handle):
    """The chunk budget on ``handle``'s device: CHUNK_BYTES on CPUs, GPU_CHUNK_BYTES on GPUs."""
    if not handle.is_gpu:
        return CHUNK_BYTES
    return min(GPU_CHUNK_BYTES, handle.device.max_mem_alloc_size // 2)


def wrw_splits(geo, handle):
    """Parts the local GEMM of backward-weights splits the chunk's tiles into on ``handle``'s
    device (a power of two up to MAX_SPLITS): enough for two work-groups per compute unit with
    64 x 64 blocks, each part MIN_SPLIT_TILES tiles or more, the copies of S within
    SPLIT_BYTES; 1 on CPUs and in the other directions."""
    if not (geo.wrw and handle.is_gpu):
        return 1
    blocks = ceil_div(geo.rows, 64) * ceil_div(geo.depth, 64) * geo.positions * geo.groups
    want = min(MAX_SPLITS, ceil_div(2 * handle.device.max_compute_units, blocks),
               geo.chunk_rows * geo.tiles_w // MIN_SPLIT_TILES,
               SPLIT_BYTES // (geo.positions * geo.plane * FLOAT))
    return 1 << max(0, want.bit_length() - 1) if want > 1 else 1


def device_geometry(problem, m, handle):
    """The Geometry of ``problem`` on ``handle``'s device: its chunk budget and, for
    backward-weights, its splits."""
    geo = geometry(problem, m, chunk_bytes(handle))
    return replace(geo, splits=wrw_splits(geo, handle))


def geometry(problem, m, budget=None):
    """The Geometry of ``problem`` computed with F(m x m, 3 x 3) in chunks of ``budget`` bytes
    (None: CHUNK_BYTES)."""
    (pt, _), (pl, _) = problem.conv.pads
    n, c, h, w = problem.x.shape
    k, oh, ow, g = problem.k, problem.out_h, problem.out_w, problem.groups
    tiles = (ceil_div(oh, m), ceil_div(ow, m))
    budget = CHUNK_BYTES if budget is None else budget
    if problem.direction is Direction.BACKWARD_DATA:   # dy (*) rotated, transposed filter
        return Geometry(m, problem.direction, c // g, k // g, g, (k, oh, ow), (c, h, w),
                        (2 - pt, 2 - pl), ceil_div(h, m), ceil_div(w, m), n, budget)
    # forward; backward-weights: S[k][c] per group and position, x tiles in, dy tiles "out"
    return Geometry(m, problem.direction, k // g, c // g, g, (c, h, w), (k, oh, ow),
                    (pt, pl), *tiles, n, budget)


def fits_int32(geo):
    """Whether every element index the kernels form in int stays below 2**31 (size_t is used
    for buffer offsets, int for tile, channel and pixel counts)."""
    limit = 2 ** 31 - 1
    return geo.tiles + geo.pitch <= limit and geo.workspace() // FLOAT <= limit


# {{{ invokers

#: Work-items per work-group of the GEMMs on CPUs: one, so that PoCL's threads share out heavy
#: work-items evenly (groups of 16 left a thread idle at the end of small launches).
CPU_GEMM_GROUP = 1


def _launch(queue, kernel, items, local):
    """Enqueue a 1-D range of at least ``items`` work-items in groups of ``local``."""
    return cl.enqueue_nd_range_kernel(queue, kernel, (round_up(max(items, 1), local),), (local,))


def _i32(*values):
    return [np.int32(v) for v in values]


def _data_kernel(handle, name, m, lanes, **epilogue):
    """The transform kernel ``name`` (kernels/<name>.cl) for F(m, 3) with ``lanes`` tiles (or
    filters) per work-item; the output's kernels with the problem's epilogue_defines() fused."""
    return handle.build(KERNELS / f"{name}.cl", name, {"WINO_M": m, "TT": lanes, **epilogue})


#: The tunables the GEMMs read (the transforms read TT): the vector kernels' (wino_gemm.cl,
#: wino_gemm_wrw.cl) and the local-memory kernel's (wino_gemm_local.cl; config GEMM = "local").
GEMM_TUNABLES = ("TM", "VW", "NV", "MR")
LOCAL_TUNABLES = ("BM", "BN", "BK", "RM", "RN")


def _gemm(handle, config, wrw, vector_group, splits=1):
    """The GEMM of ``config`` (wino_gemm or wino_gemm_wrw: the vector kernel, or with GEMM =
    "local" its local-memory form, backward-weights' in ``splits`` parts; configs without GEMM,
    the CPU's, take the vector kernel), and how to enqueue it over ``rows`` x ``cols`` of each
    of ``batches`` products."""
    name = "wino_gemm_wrw" if wrw else "wino_gemm"
    if config.get("GEMM", "vector") == "vector":
        kernel = handle.build(KERNELS / f"{name}.cl", name,
                              {k: config[k] for k in GEMM_TUNABLES})
        tn, tm = config["VW"] * config["NV"], config["TM"] * config["MR"]

        def launch(queue, rows, cols, batches):
            return _launch(queue, kernel, ceil_div(cols, tn) * ceil_div(rows, tm) * batches,
                           vector_group)
        return kernel, launch
    kernel = handle.build(KERNELS / "wino_gemm_local.cl", f"{name}_local",
                          {"WRW": int(wrw), **{k: config[k] for k in LOCAL_TUNABLES},
                           **({"SPLIT": splits} if splits > 1 else {})})
    group = (config["BN"] // config["RN"], config["BM"] // config["RM"], 1)

    def launch(queue, rows, cols, batches):
        grid = (ceil_div(cols, config["BN"]) * group[0], ceil_div(rows, config["BM"]) * group[1],
                batches * splits)
        return cl.enqueue_nd_range_kernel(queue, kernel, grid, group)
    return kernel, launch


def _epilogue_values(problem, buffers):
    """The epilogue's values as the output's kernels take them after their own arguments (none
    for a bare problem)."""
    return buffers.epilogue_args.kernel_args() if problem.epilogue else ()


def build(problem, handle, m, config):
    """The invoker of ``problem`` with F(m x m, 3 x 3) and ``config``; the output's kernel
    stores the problem's epilogue.  Forward and backward-data transform the filter into the
    workspace's U on every call."""
    geo = device_geometry(problem, m, handle)
    local = config["WG"]
    gemm_local = local if handle.is_gpu else CPU_GEMM_GROUP
    if geo.direction is Direction.BACKWARD_WEIGHTS:
        return _build_wrw(problem, geo, handle, config, local, gemm_local)
    pack, run = _stages(problem, geo, handle, m, config)
    u = geo.row_count * geo.pitch

    def invoker(buffers, scratch):
        return pack(buffers.w, scratch, u) + run(buffers, scratch, scratch, u)
    return invoker


def build_packing(problem, handle, m, config):
    """Forward and backward-data with constant weights: the filter transform alone fills a
    buffer of U (``geo.fixed_floats``), and the other stages read U from there; None for
    backward-weights, whose filter is the output."""
    geo = device_geometry(problem, m, handle)
    if geo.direction is Direction.BACKWARD_WEIGHTS:
        return None
    pack, run = _stages(problem, geo, handle, m, config)
    return Packing(geo.fixed_floats * FLOAT, lambda w, packed: pack(w, packed, 0),
                   lambda buffers, scratch, packed: run(buffers, scratch, packed, 0))


def _stages(problem, geo, handle, m, config):
    """Forward and backward-data as two enqueuing functions: ``pack(w, u_buffer, u_offset)``,
    the filter transform writing U, and ``run(buffers, scratch, u_buffer, u_offset)``, the
    input transform, GEMM and output transform of every chunk reading U there."""
    local = config["WG"]
    gemm_local = local if handle.is_gpu else CPU_GEMM_GROUP
    lanes = config["VW"]     # filters per work-item: the GEMM's vector width
    panel_items = not handle.is_gpu   # wino_filter.cl: a work-item per panel of U on CPUs
    filt = _data_kernel(handle, "wino_filter", m, lanes, PANEL_ITEMS=int(panel_items))
    inp = _data_kernel(handle, "wino_input", m, config["TT"])
    out = _data_kernel(handle, "wino_output", m, config["TT"], **problem.epilogue_defines())
    gemm, gemm_launch = _gemm(handle, config, False, gemm_local)
    tt = config["TT"]
    (ci, hi, wi), (co, ho, wo) = geo.in_shape, geo.out_shape
    v, mm = 0, geo.positions * ci * geo.pitch
    flip = int(geo.direction is Direction.BACKWARD_DATA)
    runs = ceil_div(geo.tiles_w, tt)
    queue = handle.queue

    def pack(w, u_buffer, u):
        filt.set_args(w, u_buffer, *_i32(u, geo.plane, geo.rows, geo.depth, geo.groups, flip))
        return [_launch(queue, filt, round_up(geo.rows, U_PANEL)
                        // (U_PANEL if panel_items else lanes) * geo.depth * geo.groups, local)]

    def run(buffers, scratch, u_buffer, u):
        src, dst = (buffers.y, buffers.x) if flip else (buffers.x, buffers.y)
        events = []
        for r0, rows in geo.chunks():
            tiles = rows * geo.tiles_w
            inp.set_args(src, scratch, *_i32(v, geo.batch, ci, hi, wi, *geo.read_limits,
                                             *geo.pads, geo.tiles_h, geo.tiles_w, r0, rows,
                                             geo.pitch, 0, 1, 1))
            events.append(_launch(queue, inp, runs * rows * ci, local))
            gemm.set_args(u_buffer, np.int32(u), np.int32(geo.plane), scratch, np.int32(v),
                          scratch,
                          *_i32(mm, geo.rows, geo.depth, geo.groups, tiles, geo.pitch,
                                geo.positions))
            events.append(gemm_launch(queue, geo.rows, tiles, geo.positions * geo.groups))
            out.set_args(scratch, np.int32(mm), dst,
                         *_i32(co, ho, wo, geo.tiles_h, geo.tiles_w, r0, rows, geo.pitch),
                         *_epilogue_values(problem, buffers))
            events.append(_launch(queue, out, runs * rows * co, local))
        return events
    return pack, run


def _build_wrw(problem, geo, handle, config, local, gemm_local):
    """Backward-weights: S = sum over chunks of E X per position and group, then G^T S G (and
    the epilogue, in the one kernel that writes dw).  The local GEMM sums parts of each chunk's
    tiles into geo.splits copies of S, which the last kernel adds up; the vector GEMM writes
    one (its workspace then holds copies it does not use)."""
    grad = _data_kernel(handle, "wino_grad", geo.m, config["TT"])
    inp = _data_kernel(handle, "wino_input", geo.m, config["TT"])
    splits = geo.splits if config.get("GEMM") == "local" else 1
    gemm, gemm_launch = _gemm(handle, config, True, gemm_local, splits)
    lanes = config["VW"]     # filters per work-item: the GEMM's vector width
    final = _data_kernel(handle, "wino_filter_out", geo.m, lanes, **problem.epilogue_defines(),
                         **({"SPLIT": splits} if splits > 1 else {}))
    (c, h, w), (k, oh, ow) = geo.in_shape, geo.out_shape
    chunk = geo.chunk_rows * geo.tiles_w
    xt, et = geo.fixed_floats, geo.fixed_floats + geo.positions * chunk * geo.x_row
    runs = ceil_div(geo.tiles_w, config["TT"])
    queue = handle.queue

    def invoker(buffers, scratch):
        events = []
        for index, (r0, rows) in enumerate(geo.chunks()):
            tiles = rows * geo.tiles_w
            inp.set_args(buffers.x, scratch, *_i32(xt, geo.batch, c, h, w, *geo.read_limits,
                                                   *geo.pads, geo.tiles_h, geo.tiles_w, r0,
                                                   rows, geo.pitch, geo.x_row, geo.depth,
                                                   geo.cg_pad))
            events.append(_launch(queue, inp, runs * rows * c, local))
            grad.set_args(buffers.y, scratch, *_i32(et, geo.batch, k, oh, ow, geo.tiles_h,
                                                    geo.tiles_w, r0, rows, geo.pitch))
            events.append(_launch(queue, grad, runs * rows * k, local))
            gemm.set_args(scratch, *_i32(et, geo.pitch), scratch,
                          *_i32(xt, geo.x_row, tiles * geo.x_row), scratch,
                          *_i32(0, geo.plane, geo.rows, geo.depth, geo.cg_pad, geo.groups,
                                tiles, geo.positions, int(index > 0)))
            events.append(gemm_launch(queue, geo.rows, geo.depth, geo.positions * geo.groups))
        final.set_args(scratch, *_i32(0, geo.plane), buffers.w,
                       *_i32(k, geo.depth, geo.cg_pad), *_epilogue_values(problem, buffers))
        events.append(_launch(queue, final, k * ceil_div(geo.depth, lanes), local))
        return events
    return invoker

# }}}
