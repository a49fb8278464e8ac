"""Convolution tensors as matrices: views, pitches, chunks, and the kernels that unfold them."""
import math
from importlib import resources
from typing import NamedTuple

import numpy as np
import pyopencl as cl
from convsolve import Direction, Problem, ceil_div, round_up

from .configs import device_kind
from .gemm import epilogue_kernel

KERNELS = resources.files(__package__) / "kernels"

#: Consecutive output (im2col) and input (col2im) columns per work-item, by device type: on
#: PoCL a work-item per short run is slow (32 columns: 7 ms against 20 ms for 8 on ResNet-50's
#: 3x3 64-channel layer at batch 8), and 64 beat 32 where rows are wide (a row of 56 is one
#: work-item, not 32 + 24): im2col 1.2-1.5x at 56x56 and 112x112, col2im 1.9x at stride 2
#: (BENCHMARKS.md, 2026-12-05); GPUs want one column per work-item, coalesced.
IM2COL_TW = {"cpu": 64, "gpu": 1}
COL2IM_TW = {"cpu": 64, "gpu": 1}
#: Work-group shapes of im2col and col2im by device type (None: the driver's choice).  PoCL
#: picks a local size that divides the global one, whose last dimension is the image count, so
#: it compiled a new work-group function (100-190 ms) for each batch; a fixed shape gives one per
#: build, and these measured no slower (tools/unfold_local.py; 2-vCPU Xeon, AVX-512, PoCL 3.1,
#: 2026-12-03, batch 8, quiet: im2col (1, 8, 1) 4.2 against 4.9 ms on ResNet-50's 3x3
#: 64-channel 56x56 layer, 1.95 against 4.36 at 256 channels 14x14; col2im (8, 1, 1) 2.23
#: against 3.08 and 0.99 against 1.10).  GPU drivers compile once per build.
LOCAL_SIZE = {"cpu": {"im2col": (1, 8, 1), "col2im": (8, 1, 1)}, "gpu": {}}
#: Workspace budget per chunk of images: the chunk's per-image matrices fit it (see
#: plan.bytes_per_image; a split reduction's partial dW comes on top).
COLUMN_BUDGET_BYTES = 64 << 20

def out_pixels(problem):
    """Output elements per channel of an image: OH * OW in 2-D, the product of any rank's."""
    return math.prod(problem.out_sizes)


def in_pixels(problem):
    """Input elements per channel of an image: H * W in 2-D, the product of any rank's."""
    return math.prod(problem.in_sizes)


def taps(problem):
    """Filter taps per channel: R * S in 2-D, the product of any rank's filter sizes."""
    return math.prod(problem.fil_sizes)


def unfold_args(problem):
    """``problem``'s sizes as its unfold kernels take them: CS_CONV_PARAMS (convsolve.h, via
    Problem.kernel_args) for a 2-D one, else ND_CONV_PARAMS of unfold_nd.cl, the problem as a
    3-D one (a 1-D one: depth and height 1, pad 0, stride and dilation 1)."""
    if problem.spatial_dims == 2:
        return problem.kernel_args()
    conv, outer = problem.conv, 3 - problem.spatial_dims

    def three(values, fill):
        return (fill,) * outer + tuple(values)
    return tuple(np.int32(v) for v in (
        problem.c, *three(problem.in_sizes, 1), *three(problem.fil_sizes, 1),
        *three(problem.out_sizes, 1), problem.groups, *three([lo for lo, _ in conv.pads], 0),
        *three(conv.strides, 1), *three(conv.dilations, 1)))


class View(NamedTuple):
    """Matrices in a buffer: matrix (image i, group g) starts at offset + i*image + g*group,
    rows ``ld`` elements apart. (A split reduction uses the image step for its slices.)"""

    buffer: object
    offset: int
    ld: int
    image: int
    group: int

    def at(self, image=0, group=0):
        return self._replace(offset=self.offset + image * self.image + group * self.group)


class Columns:
    """im2col, col2im and the output-gradient gather of one channels-first problem of any
    spatial rank, into or out of Views: 2-D through im2col.cl and col2im.cl, ranks 1 and 3
    through unfold_nd.cl; col2im stores ``epilogue`` (backward data's, or None; 2-D only:
    unfold_nd.cl has none, so the solvers fuse none there) into dx.  col2im is built for
    backward-data problems only: a program load less for the others (30 ms a process on PoCL,
    whose cache hits each preprocess the OpenCL headers)."""

    def __init__(self, handle, problem, epilogue=None):
        self.queue = handle.queue
        self.problem = p = problem
        rank = p.spatial_dims
        if epilogue is not None and rank != 2:
            raise ValueError(f"{p.key()}: unfold_nd.cl's col2im stores no epilogue (fused_stages "
                             "is 0 for backward-data through columns in ranks 1 and 3)")
        # dy as the input of a plain 1x1 convolution: its column matrices are dy's own
        self.outputs_problem = Problem.convolution(
            (p.n, p.k, *p.out_sizes), (p.k, p.k // p.groups, *[1] * rank), groups=p.groups)
        kind = device_kind(handle)
        self.im2col_tw, self.col2im_tw = IM2COL_TW[kind], COL2IM_TW[kind]
        self.local_size = LOCAL_SIZE[kind]   # {kernel name: work-group shape}
        if rank == 2:   # one define each: the builds that 2-D tunings and find-dbs timed
            builds = (("im2col.cl", "im2col", {"IM2COL_TW": self.im2col_tw}),
                      ("col2im.cl", "col2im", {"COL2IM_TW": self.col2im_tw}))
        else:           # unfold_nd.cl: one program for both kernels
            both = {"IM2COL_TW": self.im2col_tw, "COL2IM_TW": self.col2im_tw}
            builds = (("unfold_nd.cl", "im2col_nd", both), ("unfold_nd.cl", "col2im_nd", both))
        scalars = [None, None, *[np.int32] * (len(unfold_args(p)) + 5)]   # 5 offsets, pitches
        (im2col_file, im2col, im2col_defines), (col2im_file, col2im, col2im_defines) = builds
        self.im2col_kernel = handle.build(KERNELS / im2col_file, im2col, im2col_defines)
        self.im2col_kernel.set_scalar_arg_dtypes(scalars)
        self.col2im_kernel = None
        if p.direction is Direction.BACKWARD_DATA:
            self.col2im_kernel = epilogue_kernel(handle, col2im_file, col2im, col2im_defines,
                                                 scalars, epilogue)

    def im2col(self, x, image0, count, col):
        """Unfold images [image0, image0 + count) of x into the column matrices ``col``."""
        return self._unfold(self.problem, x, image0, count, col)

    def gather_outputs(self, dy, image0, count, dst):
        """Copy images [image0, image0 + count) of dy (per group Kg x output pixels) into
        ``dst``."""
        return self._unfold(self.outputs_problem, dy, image0, count, dst)

    def _unfold(self, problem, src, image0, count, dst):
        """im2col of images [image0, image0 + count) of ``problem``'s input ``src`` into ``dst``."""
        p = problem
        runs = (_row_blocks(p.out_sizes, self.im2col_tw) if p.spatial_dims == 2
                else _runs(p.out_sizes, self.im2col_tw))
        size = (runs, p.c // p.groups * taps(p), count * p.groups)
        self.im2col_kernel.set_args(src, dst.buffer, *unfold_args(p),
                                    image0 * p.c * in_pixels(p), dst.offset, dst.ld, dst.image,
                                    dst.group)
        return self._enqueue(self.im2col_kernel, size, "im2col")

    def col2im(self, col, dx, image0, count, values=None):
        """Fold the column matrices ``col`` into images [image0, image0 + count) of dx,
        overwriting them (with the epilogue's ``values``, EpilogueArgs, where it has one)."""
        p = self.problem
        size = (_runs(p.in_sizes, self.col2im_tw), p.c // p.groups, count * p.groups)
        self.col2im_kernel.set_args(col.buffer, dx, *unfold_args(p), col.offset, col.ld,
                                    col.image, col.group, image0 * p.c * in_pixels(p),
                                    *(values.kernel_args() if values else ()))
        return self._enqueue(self.col2im_kernel, size, "col2im")

    def _enqueue(self, kernel, size, name):
        """Enqueue ``kernel`` over ``size`` in LOCAL_SIZE's groups for it (the kernels skip the
        work-items past their sizes)."""
        local = self.local_size.get(name)
        if local is not None:
            size = tuple(round_up(extent, step) for extent, step in zip(size, local))
        return cl.enqueue_nd_range_kernel(self.queue, kernel, size, local)


def _runs(sizes, width):
    """Work-items over an image of ``sizes`` (outermost first) that take ``width`` consecutive
    elements of a row each: an unfold launch's first dimension."""
    *outer, last = sizes
    return math.prod(outer) * ceil_div(last, width)


def _row_blocks(sizes, width):
    """Work-items of im2col.cl over an (OH, OW) output: ``width`` consecutive columns of
    max(1, width // OW) consecutive rows each (col2im.cl's rows stay one a work-item: taking
    several did not speed it up)."""
    oh, ow = sizes
    return ceil_div(oh, max(1, width // ow)) * ceil_div(ow, width)


def padded_pitch(count):
    """A row pitch >= count whose byte size is not a multiple of 4 KiB (such pitches halve the
    CPU GEMM's speed through cache-set conflicts)."""
    return count + 16 if (count * 4) % 4096 == 0 else count


def images_per_chunk(problem, bytes_per_image, budget):
    """How many images one workspace-sized chunk holds: as many as fit ``budget``, at least 1."""
    return max(1, min(problem.n, budget // max(1, bytes_per_image)))
