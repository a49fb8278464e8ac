"""Convolution as grouped matrix products: the workspace layouts and invokers of the solvers.

Per image n and group g, with Cg = C/G, Kg = K/G, the column matrix col[n, g] is
(Cg*R*S) x (OH*OW): im2col of x, or x itself for a 1x1, stride-1, unpadded filter. Then
  forward:          y[n, g]  = W[g] col[n, g]                    (Kg x OHOW)
  backward-data:    col[n, g] = W[g]^T dy[n, g], then col2im     (x itself for the plain 1x1)
  backward-weights: dW[g]   = sum over n of dy[n, g] col[n, g]^T
In spatial rank 1 and 3 (channels-first) R*S, OH*OW and H*W stand for the products of the
filter, output and input sizes (conv_layout.taps, out_pixels, in_pixels); only the unfold
kernels differ (conv_layout.Columns).
Images go in chunks that fit the workspace. By default a chunk's column matrices are stacked
image after image, and the products of a chunk are batched into one GEMM launch per image or
per group, whichever needs fewer launches. Backward-weights then writes one partial dW per image
(a "slice" of the reduction over the batch), and convsolve.SplitSum adds them up in order.

The plain products of forward and backward-data lay the images side by side as the columns
instead (``merges_images``; gemm.cl's COL_IMAGES) on GPUs (local-memory configs) where that
product still fills the device, and on CPUs (register tiles packing op(B)) where a product per
image would leave CPU_IMAGE_WASTE of its tiles' columns empty: one product per group covers
every image, so a 14x14 or 7x7 layer's 196 or 49 pixels an image no longer leave a part of each
image's last column tile empty (7x7 in 32-column tiles: 15 of 64). On CPUs forward's products
over column matrices do the same: the stacked matrices of a chunk are op(B)'s images, one
matrix apart (their pitch is then the image's pixels, as C's).

With ``side_by_side`` (backward-weights only) a chunk's images lie side by side instead: col[g]
is (Cg*R*S) x (images*OH*OW), and dy is gathered the same way, so dW[g] is one product whose
reduction runs over the whole chunk. It is split into slices only as far as the product needs
tiles to fill a large device (reduction_slices). A reduction of one slice goes straight into dW.
Without columns (plain 1x1, no workspace) the products accumulate into dW image after image.
Every order is fixed, so results are deterministic.

A problem with an epilogue (the solvers' fused_stages takes all of it, in every direction, but
none for backward-data through columns in ranks 1 and 3, whose col2im has none) gets it in the
store of the kernel after which each output element is final: the GEMM that
writes y, dx (plain 1x1) or dW; col2im for dx through columns; the split sum for a split dW.
Where dW is added up over several launches (chunks, or images without columns), each launch
stores its part with alpha, the first with the caller's beta and the later ones with beta = 1
(stored_values): beta applies once, to the prior dW, and alpha once to every part of the sum.
"""
from typing import NamedTuple

from convsolve import Direction, Epilogue, EpilogueArgs, SplitSum, ceil_div

from . import configs, conv_layout
from .conv_layout import Columns, View, images_per_chunk, in_pixels, out_pixels, padded_pitch, taps
from .gemm import Gemm

#: The edge of the dW tiles the split rule counts: the tile of the GPU's 64 x 64 GEMM config
#: (configs.DEFAULT_CONFIGS["gpu"][1]), the one products too small for 128 x 128 tiles take. A
#: constant, not read from that config, so that the workspace depends neither on the device nor
#: on retuning.
SPLIT_TILE = 64
#: A side-by-side reduction is split until its slices have this many SPLIT_TILE x SPLIT_TILE
#: tiles of dW in all (about four work-groups for each of a 132-unit GPU's compute units)...
SPLIT_TILES = 512
#: ...as long as slices stay at least this deep...
MIN_SLICE_DEPTH = 256
#: ...and there are at most this many partial results to add up.
MAX_SLICES = 128


class Layout(NamedTuple):
    """Where one chunk's matrices lie in the workspace (element offsets; buffer left None)."""

    chunk: int          # images per chunk
    columns: View       # col[image, group]
    outputs: View       # side by side: dy gathered like the columns (else None: dy read in place)
    partials: int       # backward-weights: offset of the partial dW of the reduction's slices
    slices: int         # backward-weights: partial dW room is reserved for this many slices
    elements: int       # workspace size: the last matrix written ends exactly here


def layout(problem, side_by_side=False):
    """The workspace layout of a solver that goes through column matrices (``side_by_side``:
    backward-weights only)."""
    p, g = problem, problem.groups
    rows, ohow = _columns_rows(p), out_pixels(p)
    chunk = images_per_chunk(p, bytes_per_image(p, side_by_side),
                             conv_layout.COLUMN_BUDGET_BYTES)
    if side_by_side:
        width = chunk * ohow
        ld = padded_pitch(width)
        columns = View(None, 0, ld, ohow, rows * ld)
        outputs = View(None, g * rows * ld, ld, ohow, p.k // g * ld)
        partials = outputs.offset + p.k * ld
        _, slices = reduction_slices(p, width)
        last_row_end = partials - ld + width                # of dy
    else:
        ld = padded_pitch(ohow)
        columns = View(None, 0, ld, g * rows * ld, rows * ld)
        outputs = None
        partials = chunk * g * rows * ld
        slices = chunk if p.direction is Direction.BACKWARD_WEIGHTS else 1  # one per image
        last_row_end = partials - ld + ohow                 # of the columns
    end = partials + slices * p.k * rows if slices > 1 else last_row_end
    return Layout(chunk, columns, outputs, partials, slices, end)


def bytes_per_image(problem, side_by_side=False):
    """Workspace bytes per image of a chunk: its column matrices, and for backward-weights its
    gathered dy (side by side) or its partial dW (stacked)."""
    p, ohow = problem, out_pixels(problem)
    columns = p.groups * _columns_rows(p)
    if side_by_side:
        return (columns + p.k) * ohow * 4
    partial = p.k * _columns_rows(p) if p.direction is Direction.BACKWARD_WEIGHTS else 0
    return (columns * padded_pitch(ohow) + partial) * 4


def reduction_slices(problem, width, most=None):
    """(depth, count) of the slices a side-by-side reduction of ``width`` columns is split
    into: enough for SPLIT_TILES tiles of dW, each at least MIN_SLICE_DEPTH deep, at most ``most``
    (default MAX_SLICES). The rule reads the problem only, so the workspace does not depend on
    the device."""
    p = problem
    tiles = (p.groups * ceil_div(p.k // p.groups, SPLIT_TILE)
             * ceil_div(_columns_rows(p), SPLIT_TILE))
    wanted = max(1, min(ceil_div(SPLIT_TILES, tiles), width // MIN_SLICE_DEPTH,
                        MAX_SLICES if most is None else most))
    depth = ceil_div(width, wanted)
    return depth, ceil_div(width, depth)


def _columns_rows(problem):
    """Rows of one column matrix: C/G * R * S (the taps of any rank)."""
    return problem.c // problem.groups * taps(problem)


def workspace_bytes(problem, side_by_side=False):
    """The exact workspace of a solver that goes through column matrices."""
    return layout(problem, side_by_side).elements * 4


def fits_int32(problem, use_columns, side_by_side=False):
    """True when every element offset the kernels take (tensors, and the workspace when
    ``use_columns``) fits their 32-bit int arguments."""
    largest = max(problem.x.size, problem.w.size, problem.y.size,
                  layout(problem, side_by_side).elements if use_columns else 0)
    return largest <= 2 ** 31 - 1


#: The epilogue values of a GEMM built with an epilogue that writes partial sums, not the
#: output: the product itself (alpha 1, beta 0).
PRODUCT = EpilogueArgs()


def stored_epilogue(problem):
    """The epilogue the kernel that writes ``problem``'s output is built with (None: bare).
    Backward: alpha and blend always (beta = 0 does not read the prior), so that one build
    serves both backward structures and dW added up over launches blends with beta = 1."""
    if problem.epilogue is None or problem.direction is Direction.FORWARD:
        return problem.epilogue
    return Epilogue(blend=True)


def stored_values(values, accumulate):
    """The epilogue values (None: bare) of a launch that stores its part of dW: the caller's for
    the first part, alpha with beta = 1 for a part added to the ones stored (``accumulate``)."""
    return values._replace(beta=1.0) if values is not None and accumulate else values


#: The widest tile (columns of C) whose configs lay images side by side (merges_images): on the
#: H100 side by side in 128 x 128 tiles was never faster than in 64 x 64 ones and often slower
#: than per image (TUNING.md, "1x1 products side by side on the H100"), so configs of wider
#: tiles (the large default, configs tuned per image) keep their products per image.
SIDE_BY_SIDE_COLUMNS = 64
#: On CPUs, the directions whose products go side by side, and the share of a per-image product's
#: columns its tiles would leave empty (each image's last tile of TN columns partly outside the
#: image) from which they do.  Zen 4 EPYC (AVX-512, PoCL 3.1), batch 8, best of three rounds
#: (TUNING.md, "1x1 products side by side on CPUs"): forward 0.84-0.92x the per-image time at
#: 7x7, 0.90-1.00x at 14x14; backward-data 0.90-0.93x at 7x7 but 1.02-1.07x at 14x14 and on
#: MobileNet-v2's products, so it keeps a product per image.  Forward over column matrices
#: (Im2ColGemm, strided Gemm1x1), same machine, three rounds interleaved: the GEMM of ResNet-50's
#: 3x3/2 layer to 7x7 0.80-0.84x, of a 2048 -> 512 7x7 1x1 0.77-0.82x (TUNING.md, "Column
#: matrices side by side on CPUs, im2col's short rows, col2im's strided columns").
CPU_MERGED_DIRECTIONS = (Direction.FORWARD,)
CPU_IMAGE_WASTE = 0.05


def merges_images(problem, use_columns, config, handle):
    """Whether a plan lays its images side by side as the columns of one product per group: the
    plain products (no column matrices) of forward and backward-data, on a local-memory (GPU)
    ``config`` of tiles at most SIDE_BY_SIDE_COLUMNS wide that cut that product into
    configs.FILL work-groups a compute unit of ``handle``'s device (with fewer, per image keeps
    more of the device busy), or on a register-tile (CPU) config that packs op(B) (MR > 1), in
    CPU_MERGED_DIRECTIONS, where per image CPU_IMAGE_WASTE of the columns would be computed in
    vain, through column matrices too when their pitch is the image's pixels (COL_IMAGES reads
    op(B) and C with one pitch); never with more groups than images (side by side takes a launch
    a group, per image min(images, groups): 512 launches made a 512-group 1x1 layer 400x slower
    on an H100).  On GPUs their default config is configs.smallest."""
    if problem.direction is Direction.BACKWARD_WEIGHTS or problem.groups > problem.n:
        return False
    if not config["USE_LOCAL"]:
        tile, pixels = config["TN"] * config["WGD_N"], out_pixels(problem)
        return (config["MR"] > 1 and problem.direction in CPU_MERGED_DIRECTIONS
                and (not use_columns or padded_pitch(pixels) == pixels)
                and ceil_div(pixels, tile) * tile / pixels - 1 >= CPU_IMAGE_WASTE)
    if use_columns or configs.tile_shape(config)[1] > SIDE_BY_SIDE_COLUMNS:
        return False
    m, n, groups = main_product(problem, use_columns, merged=True)
    return configs.work_groups(config, m, n, groups) >= configs.filled(handle)


def grouped_gemm(gemm, mnk, beta, a, b, c, images, groups, values=None, merged=False):
    """One GEMM per (image, group), batched into min(images, groups) launches, or with
    ``merged`` (a Gemm built with col_images) one per group over the images side by side; returns
    events. ``values``: the epilogue's, for a Gemm built with one (row m of C's matrix of group g
    is channel g * M + m)."""
    m, n, k = mnk
    if images <= groups and not merged:   # a launch per image, its groups batched
        return [gemm(m, n, k, 1.0, beta, *(_batch(v.at(image=i), v.group) for v in (a, b, c)),
                     batch=groups, values=values, chan=(0, m)) for i in range(images)]
    # a launch per group: its images batched, or side by side as one product's columns
    columns, batch = (images * n, 1) if merged else (n, images)
    return [gemm(m, columns, k, 1.0, beta, *(_batch(v.at(group=g), v.image) for v in (a, b, c)),
                 batch=batch, values=values, chan=(g * m, 0)) for g in range(groups)]


def sliced_products(gemm, mn, width, depth, a, b, partials, groups, values=None):
    """Events of a reduction over ``width`` columns in slices of ``depth`` (the last one
    shorter): slice s's products A[s] B[s] (the Views' image step is a slice) into
    ``partials``.at(s), for a split sum to add up in order."""
    full = width // depth
    events = grouped_gemm(gemm, (*mn, depth), 0.0, a, b, partials, full, groups, values)
    if full * depth < width:     # the last slice is shorter
        events += grouped_gemm(gemm, (*mn, width - full * depth), 0.0, a.at(full), b.at(full),
                               partials.at(full), 1, groups, values)
    return events


def _batch(view, stride):
    return (view.buffer, view.offset, view.ld, stride)


def main_product(problem, use_columns, side_by_side=False, merged=False):
    """(M, N, batch) of the products a plan launches most of: what the default config is chosen
    for (``merged``: as merges_images lays them out)."""
    p, g = problem, problem.groups
    kg, ohow, rows = p.k // g, out_pixels(p), _columns_rows(problem)
    images = layout(p, side_by_side).chunk if use_columns else p.n
    if p.direction is not Direction.BACKWARD_WEIGHTS:
        m = kg if p.direction is Direction.FORWARD else rows
        return (m, images * ohow, g) if merged else (m, ohow, images * g)
    if use_columns and side_by_side:
        return kg, rows, reduction_slices(p, images * ohow)[1] * g
    return kg, rows, (images if use_columns else 1) * g


def build(problem, handle, config, use_columns, side_by_side=False):
    """The invoker computing ``problem`` with GEMMs, through column matrices when ``use_columns``
    (laid out side by side when ``side_by_side``, for backward-weights).

    Without columns (1x1, stride 1, no padding) x / dx serve as the column matrices directly.
    """
    p, g = problem, problem.groups
    kg, hw, ohow = p.k // g, in_pixels(p), out_pixels(p)
    cg_rs = _columns_rows(p)
    direction, epilogue = p.direction, stored_epilogue(p)
    folds = use_columns and direction is Direction.BACKWARD_DATA   # col2im writes dx
    merged = merges_images(p, use_columns, config, handle)
    gemm = Gemm(handle, config, trans_a=direction is Direction.BACKWARD_DATA,
                trans_b=direction is Direction.BACKWARD_WEIGHTS,
                epilogue=None if folds else epilogue, col_images=merged)
    if use_columns:
        plan = layout(p, side_by_side)
        cols = Columns(handle, p, epilogue if folds else None)
        if direction is Direction.BACKWARD_WEIGHTS:
            return _reduction_invoker(p, plan, cols, gemm, SplitSum(handle, epilogue))
    chunk = plan.chunk if use_columns else p.n

    def invoker(buffers, scratch):
        events, values = [], buffers.epilogue_args
        weights = _weights(p, buffers)
        for n0 in range(0, p.n, chunk):
            count = min(chunk, p.n - n0)
            outputs = _outputs(p, buffers, n0)
            if use_columns:
                col = plan.columns._replace(buffer=scratch)
            else:
                col = View(buffers.x, n0 * p.c * hw, hw, p.c * hw, cg_rs * hw)
            if direction is Direction.FORWARD:
                if use_columns:
                    events.append(cols.im2col(buffers.x, n0, count, col))
                events += grouped_gemm(gemm, (kg, ohow, cg_rs), 0.0, weights, col, outputs,
                                       count, g, values, merged)
            elif direction is Direction.BACKWARD_DATA:
                events += grouped_gemm(gemm, (cg_rs, ohow, kg), 0.0, weights, outputs, col,
                                       count, g, None if folds else values, merged)
                if folds:
                    events.append(cols.col2im(col, buffers.x, n0, count, values))
            else:  # backward-weights without workspace: accumulate image after image into dW
                for i in range(count):
                    accumulate = n0 + i > 0
                    events += grouped_gemm(gemm, (kg, cg_rs, ohow), float(accumulate),
                                           outputs.at(image=i), col.at(image=i), weights, 1, g,
                                           stored_values(values, accumulate))
        return events
    return invoker


def _reduction_invoker(problem, plan, cols, gemm, split_sum):
    """Backward-weights through column matrices: per chunk, the reduction over its images in
    slices (one per image when stacked), their partial dW added up in order; the chunks' sums
    accumulate into dW, each stored with the epilogue where there is one."""
    p, g = problem, problem.groups
    kg, ohow, cg_rs = p.k // g, out_pixels(p), _columns_rows(problem)

    def invoker(buffers, scratch):
        events, values = [], buffers.epilogue_args
        product = None if values is None else PRODUCT   # what partials are written with
        weights = _weights(p, buffers)
        for n0 in range(0, p.n, plan.chunk):
            count, stored = min(plan.chunk, p.n - n0), stored_values(values, n0 > 0)
            col = plan.columns._replace(buffer=scratch)
            events.append(cols.im2col(buffers.x, n0, count, col))
            if plan.outputs is not None:   # side by side: gather dy, slice as reduction_slices says
                dy = plan.outputs._replace(buffer=scratch)
                events.append(cols.gather_outputs(buffers.y, n0, count, dy))
                depth, slices = reduction_slices(p, count * ohow, most=plan.slices)
                # slice s reads columns [s * depth, (s + 1) * depth): the image step is depth
                dy, col = (v._replace(image=depth) for v in (dy, col))
            else:                          # stacked: image i is slice i, dy read in place
                dy = _outputs(p, buffers, n0)
                depth, slices = ohow, count
            if slices == 1:
                events += grouped_gemm(gemm, (kg, cg_rs, depth), float(n0 > 0), dy, col,
                                       weights, 1, g, stored)
                continue
            partials = View(scratch, plan.partials, cg_rs, p.k * cg_rs, kg * cg_rs)
            events += sliced_products(gemm, (kg, cg_rs), count * ohow, depth, dy, col, partials,
                                      g, product)
            # the slices in order; a later chunk's sum adds to dW (bare: accumulate; with an
            # epilogue, stored_values' beta = 1)
            events.append(split_sum(scratch, buffers.w, slices, p.k * cg_rs, offset=plan.partials,
                                    accumulate=n0 > 0 and stored is None, values=stored))
        return events
    return invoker


def _weights(problem, buffers):
    """W (dW) as the matrices W[g], Kg x Cg*R*S."""
    cg_rs = _columns_rows(problem)
    return View(buffers.w, 0, cg_rs, 0, problem.k // problem.groups * cg_rs)


def _outputs(problem, buffers, n0):
    """y (dy) from image n0 on as the matrices y[n, g], Kg x OH*OW."""
    p, ohow = problem, out_pixels(problem)
    return View(buffers.y, n0 * p.k * ohow, ohow, p.k * ohow, p.k // p.groups * ohow)
