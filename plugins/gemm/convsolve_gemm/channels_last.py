"""1x1 convolutions on channels-last (NWC, NHWC, NDHWC) tensors as one grouped GEMM per
direction: the plan of gemm.Gemm1x1 for channels-last problems.

With Cg = C/G, Kg = K/G and P output pixels (N * OH * OW), X is the P x C matrix of the pixels
x is read at (memory order: a pixel's channels are a row), Y the P x K matrix that y is, and
W[g] the Kg x Cg matrix of group g's weights (w's memory order, NCHW or NHWC alike for 1x1):
  forward:          Y[:, g]  = X[:, g] W[g]^T        (P x Kg; gemm.cl's TRANS_B)
  backward-data:    dX[:, g] = dY[:, g] W[g]         (P x Cg)
  backward-weights: dW[g]    = dY[:, g]^T X[:, g]    (Kg x Cg; TRANS_A, one reduction over all P)
Group g's columns of X and Y are the column block g (channel c of group g is column
c + g * Cg), so one launch runs every group (its batch stride: Cg or Kg columns).
At stride 1, X is x itself. Strided, X is gathered (pixels.cl) a chunk of images at a time into
the workspace, rows padded_pitch(C) apart; backward-data computes dX there and scatters it into
dx (zeros between the strided pixels), backward-weights adds the chunks' products into dW in
chunk order. On GPUs, backward-weights' reduction over a chunk's pixels is split by
plan.reduction_slices (as GemmWrwSplitK's: enough dW tiles to fill a large GPU), each slice's dW
into the workspace after the gathered pixels and convsolve.SplitSum adding them up in order:
without it one product's few tiles ran 4 ms at ResNet-50's 56x56 layers on the H200 (0.02x
cuDNN). CPUs keep one product (split, it ran 1.1-1.45x longer on a 2-core AVX2 EPYC at batch 8,
under load), so the workspace depends on the device (splits). Every order is fixed: results are
deterministic.
Nothing here stores an epilogue (Gemm1x1.fused_stages is 0 for channels-last problems: a GEMM
row is a pixel, not a channel); the core's pass applies it after the plan.
An NWC or NDHWC problem runs as the NHWC problem with its memory (planar): a row of pixels for
1-D, the depth slices as images for 3-D (so 3-D takes depth stride 1).
"""
from typing import NamedTuple

import numpy as np
import pyopencl as cl
from convsolve import Direction, Problem, SplitSum, round_up

from . import conv_layout
from .conv_layout import images_per_chunk, padded_pitch
from .gemm import KERNELS, Gemm
from .plan import View, reduction_slices, sliced_products

#: Work-group shape of the gather and the scatter: 64 channels of 4 pixels (a fixed shape, so
#: that PoCL compiles one work-group function per build, not one per problem).
PIXELS_LOCAL = (64, 4, 1)


def serves(problem):
    """Whether ``problem``'s x and y are both channels-last (w may be either: the same memory
    order for a 1x1 filter)."""
    return problem.x.channels_last and problem.y.channels_last


def plannable(problem):
    """Whether ``problem`` (1x1, unpadded, x and y channels-last) has a planar NHWC problem:
    every 1-D and 2-D one, a 3-D one at depth stride 1."""
    return problem.spatial_dims != 3 or problem.conv.strides[0] == 1


def planar(problem):
    """The 2-D NHWC problem with ``problem``'s memory (plannable, 1x1, unpadded): itself in
    2-D, its W pixels as a 1 x W image in 1-D, its N * D depth slices as H x W images in 3-D."""
    p = problem
    if p.spatial_dims == 2:
        return p
    (n, c, *sizes), strides = p.x.shape, p.conv.strides
    if p.spatial_dims == 1:
        images, strides = (n, c, 1, *sizes), (1, *strides)
    else:
        images, strides = (n * sizes[0], c, *sizes[1:]), strides[1:]
    return Problem.conv2d(images, (p.k, c // p.groups, 1, 1), strides, groups=p.groups,
                          direction=p.direction, dtype=p.dtype, layout="NHWC")


class Layout(NamedTuple):
    """The workspace of a channels-last problem: a strided one's gathered pixels of one chunk of
    images, then backward-weights' partial dW of its reduction's slices (element offsets)."""

    chunk: int      # images per chunk
    ld: int         # row pitch of the pixel matrix (elements)
    partials: int   # backward-weights: where the slices' partial dW start
    slices: int     # backward-weights: partial dW room for this many slices (1: no split)
    elements: int   # workspace size: the last row or partial dW ends exactly here


def splits(handle):
    """Whether backward-weights splits its reduction on ``handle``'s device: on GPUs."""
    return handle.is_gpu


def layout(problem, split=False):
    """The workspace layout of a planar channels-last problem (stride 1 reads x in place, one
    chunk of every image), backward-weights' reduction in slices if ``split`` (splits)."""
    p, ohow = problem, problem.out_h * problem.out_w
    if strided(p):
        ld = padded_pitch(p.c)
        chunk = images_per_chunk(p, ohow * ld * 4, conv_layout.COLUMN_BUDGET_BYTES)
        end = (chunk * ohow - 1) * ld + p.c
    else:
        ld, chunk, end = p.c, p.n, 0
    slices = (reduction_slices(p, chunk * ohow)[1]
              if split and p.direction is Direction.BACKWARD_WEIGHTS else 1)
    if slices == 1:
        return Layout(chunk, ld, end, 1, end)
    return Layout(chunk, ld, end, slices, end + slices * p.k * (p.c // p.groups))


def strided(problem):
    """Whether x's pixels are gathered first (stride > 1 in either dim)."""
    return problem.conv.strides != (1, 1)


def workspace_bytes(problem, split=False):
    """The exact workspace: one chunk's pixel matrix when strided, and the partial dW of a
    backward-weights ``split`` into slices."""
    return layout(problem, split).elements * 4


def fits_int32(problem):
    """True when every element offset the kernels take fits their 32-bit int arguments (on
    any device: split or not)."""
    return max(problem.x.size, problem.y.size, workspace_bytes(problem, True) // 4) <= 2 ** 31 - 1


def main_product(problem, split=False):
    """(M, N, batch, trans_a) of the product a plan launches (backward-weights ``split`` or
    not): what the default config is chosen for."""
    p, g = problem, problem.groups
    plan = layout(p, split)
    pixels = plan.chunk * p.out_h * p.out_w
    if p.direction is Direction.FORWARD:
        return pixels, p.k // g, g, False
    if p.direction is Direction.BACKWARD_DATA:
        return pixels, p.c // g, g, False
    return p.k // g, p.c // g, g * plan.slices, True


def build(problem, handle, config):
    """The invoker computing the channels-last ``problem`` (1x1, no padding) with one GEMM
    launch per chunk of images (the whole batch at stride 1)."""
    p, g = problem, problem.groups
    cg, kg, ohow = p.c // g, p.k // g, p.out_h * p.out_w
    direction = p.direction
    gemm = Gemm(handle, config, trans_a=direction is Direction.BACKWARD_WEIGHTS,
                trans_b=direction is Direction.FORWARD)
    plan = layout(p, splits(handle))
    pixels = Pixels(handle, p) if strided(p) else None
    split_sum = SplitSum(handle) if plan.slices > 1 else None
    weights = (0, cg, kg * cg)                  # W[g]: offset, ld, batch stride

    def invoker(buffers, scratch):
        events = []
        w = (buffers.w, *weights)
        for n0 in range(0, p.n, plan.chunk):
            count = min(plan.chunk, p.n - n0)
            rows = count * ohow                                       # P of this chunk
            y = (buffers.y, n0 * ohow * p.k, p.k, kg)                 # Y[:, g]
            if pixels is None:
                x = (buffers.x, n0 * ohow * p.c, p.c, cg)             # X[:, g]: x itself
            else:
                x = (scratch, 0, plan.ld, cg)
                if direction is not Direction.BACKWARD_DATA:
                    events.append(pixels.gather(buffers.x, n0, count, scratch, plan.ld))
            if direction is Direction.FORWARD:
                events.append(gemm(rows, kg, cg, 1.0, 0.0, x, w, y, batch=g))
            elif direction is Direction.BACKWARD_DATA:
                events.append(gemm(rows, cg, kg, 1.0, 0.0, y, w, x, batch=g))
                if pixels is not None:
                    events.append(pixels.scatter(scratch, plan.ld, buffers.x, n0, count))
            elif split_sum is None:  # dW accumulates over the chunks
                events.append(gemm(kg, cg, rows, 1.0, float(n0 > 0), y, x, w, batch=g))
            else:
                events += _split_reduction(p, plan, gemm, split_sum, y, x, rows, scratch,
                                           buffers.w, accumulate=n0 > 0)
        return events
    return invoker


def _split_reduction(problem, plan, gemm, split_sum, y, x, rows, scratch, dw, accumulate):
    """Events computing dW (``accumulate``: adding to it) = dY^T X over ``rows`` pixels (y, x:
    the chunk's (buffer, offset, ld, group stride)) in reduction_slices' slices: each slice's
    products into its partial dW in ``scratch``, then their sum in order."""
    p, g = problem, problem.groups
    kg, cg = p.k // g, p.c // g
    depth, slices = reduction_slices(p, rows, most=plan.slices)
    dy = View(y[0], y[1], y[2], depth * y[2], y[3])     # slice s: rows [s * depth, +depth)
    pix = View(x[0], x[1], x[2], depth * x[2], x[3])
    partials = View(scratch, plan.partials, cg, p.k * cg, kg * cg)
    events = sliced_products(gemm, (kg, cg), rows, depth, dy, pix, partials, g)
    events.append(split_sum(scratch, dw, slices, p.k * cg, offset=plan.partials,
                            accumulate=accumulate))
    return events


def conv_args(problem):
    """``problem``'s sizes as CS_CONV_PARAMS (convsolve.h) takes them, for any layout (the
    core's Problem.kernel_args() gives them for NCHW problems only)."""
    p, ((pad_t, _), (pad_l, _)) = problem, problem.conv.pads
    return tuple(np.int32(v) for v in (
        p.n, p.c, p.in_h, p.in_w, p.k, p.fil_h, p.fil_w, p.out_h, p.out_w, p.groups, pad_t,
        pad_l, *p.conv.strides, *p.conv.dilations))


class Pixels:
    """The gather of x's strided pixels into a pixel matrix, and its adjoint, the scatter of one
    into dx (pixels.cl), for one channels-last problem."""

    def __init__(self, handle, problem):
        self.queue, self.problem, self.args = handle.queue, problem, conv_args(problem)
        self.kernels = {}
        for name in ("gather_pixels", "scatter_pixels"):
            kernel = handle.build(KERNELS / "pixels.cl", name)
            kernel.set_scalar_arg_dtypes([None, None, *[np.int32] * (len(self.args) + 3)])
            self.kernels[name] = kernel

    def gather(self, x, image0, count, rows, ld):
        """The pixel matrix of images [image0, image0 + count) of x, into ``rows`` (pitch ld)."""
        p = self.problem
        return self._enqueue("gather_pixels", (p.c, p.out_h * p.out_w, count),
                             x, rows, image0 * p.in_h * p.in_w * p.c, 0, ld)

    def scatter(self, rows, ld, dx, image0, count):
        """Images [image0, image0 + count) of dx from the pixel matrix ``rows`` (pitch ld)."""
        p = self.problem
        return self._enqueue("scatter_pixels", (p.c, p.in_h * p.in_w, count),
                             rows, dx, 0, ld, image0 * p.in_h * p.in_w * p.c)

    def _enqueue(self, name, size, src, dst, *offsets):
        kernel = self.kernels[name]
        kernel.set_args(src, dst, *self.args, *offsets)
        size = tuple(round_up(extent, step) for extent, step in zip(size, PIXELS_LOCAL))
        return cl.enqueue_nd_range_kernel(self.queue, kernel, size, PIXELS_LOCAL)
