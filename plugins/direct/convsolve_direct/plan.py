"""The direct solvers' launches: the kernel folder, the defines that compile a filter size in,
kernel arguments set once per build (nd_common.cl's sizes of any rank among them), and
backward-weights' two-stage reduction (Partials)."""
import math
from dataclasses import dataclass
from importlib import resources

import numpy as np
import pyopencl as cl
from convsolve import SplitSum, ceil_div

KERNELS = resources.files(__package__) / "kernels"

#: Independent work units (work-items or work-groups) the tiles of a chunk should offer at least:
#: room to balance two CPU cores and a GPU's first wave; more makes tiles short, and each
#: tile costs a horizontal sum per accumulator and a partial dW to write and read back.
TARGET_UNITS = 4096
#: Workspace bound for the partial dWs: the batch goes in chunks of images whose tiles fit it.
BUDGET_BYTES = 64 << 20


def filter_defines(problem, config):
    """The -D defines that compile the filter size in when ``config`` asks for it."""
    if config.get("FIXED"):
        return {"FIL_H": problem.fil_h, "FIL_W": problem.fil_w}
    return {}


def set_args(kernel, first, values):
    """Set ``values`` as ``kernel``'s arguments from index ``first`` on; the index after them."""
    for index, value in enumerate(values, start=first):
        kernel.set_arg(index, value)
    return first + len(values)


def set_sizes(kernel, first, problem, *extra):
    """Set the problem's sizes (CS_CONV_PARAMS) and then ``extra`` ints as ``kernel``'s arguments
    from index ``first`` on: once per build, so a call sets only its buffers (and the epilogue's
    values, which follow: the index returned)."""
    return set_args(kernel, first, (*problem.kernel_args(), *map(np.int32, extra)))


def three_d(values, fill):
    """A 1-D or 2-D problem's per-dim ``values`` as 3-D ones, ``fill`` in the outer dims."""
    return (fill,) * (3 - len(values)) + tuple(values)


def nd_sizes(problem):
    """nd_common.cl's ND_SIZES (int32s): ``problem`` of any spatial rank as a 3-D one."""
    conv = problem.conv
    return tuple(np.int32(value) for value in (
        problem.n, problem.c, problem.k, problem.groups, *three_d(problem.in_sizes, 1),
        *three_d(problem.out_sizes, 1), *three_d(problem.fil_sizes, 1),
        *three_d([lo for lo, _ in conv.pads], 0), *three_d(conv.strides, 1),
        *three_d(conv.dilations, 1)))


def output_rows(problem):
    """The output rows of one image: every output position but the innermost (width) axis's
    (OH in 2-D, OD * OH in 3-D, 1 in 1-D)."""
    return math.prod(problem.out_sizes[:-1])


def enqueue(handle, kernel, global_size, local_size, *buffers, values=None, at=0):
    """Set ``buffers`` as the kernel's first arguments and ``values`` (an epilogue's
    convsolve.EpilogueArgs; None for a bare problem) from index ``at`` on (CS_EPI_ARGS), and
    enqueue it; returns the event."""
    set_args(kernel, 0, buffers)
    if values is not None:
        set_args(kernel, at, values.kernel_args())
    return cl.enqueue_nd_range_kernel(handle.queue, kernel, global_size, local_size)


# {{{ backward-weights in two stages: the reduction over N * OH * OW is cut into tiles of TR
# output rows (output_rows: (od, oh) pairs in 3-D) of one image (tiles_per_image of them), or,
# where a solver allows it and the batch offers more images than tiles are wanted, of every row
# of ``images`` consecutive images; stage 1 (the solver's kernel) writes one partial dW per tile
# into the workspace, stage 2 (convsolve.SplitSum) adds them up in tile order, chunk after chunk
# of images (a whole number of tiles each), so the result is bitwise the same for any chunking.
# The tiling reads the problem only (never the config or the device), so the workspace is exact
# and config-independent.

@dataclass(frozen=True)
class Partials:
    """How a backward-weights reduction is tiled: TR output rows per tile, tiles_per_image tiles
    per image (or a tile every ``images`` images), images per chunk, and ``count`` partial sums
    (the size of dW) per tile."""

    rows: int
    tiles_per_image: int
    chunk: int
    count: int
    images: int = 1

    @classmethod
    def plan(cls, problem, units_per_tile, min_rows=1, across_images=False):
        """The tiling of ``problem``: at least TARGET_UNITS / ``units_per_tile`` tiles (each
        >= ``min_rows`` rows where the image allows; with ``across_images``, of several whole
        images where the batch has more images than that), chunks within BUDGET_BYTES."""
        count = problem.w.size
        wanted = ceil_div(TARGET_UNITS, max(1, units_per_tile))
        images = max(1, problem.n // wanted) if across_images else 1
        out_rows = output_rows(problem)
        per_image = min(ceil_div(wanted, problem.n), ceil_div(out_rows, min_rows))
        rows = ceil_div(out_rows, max(1, per_image))
        per_image = ceil_div(out_rows, rows)
        sets = max(1, BUDGET_BYTES // (4 * count * per_image))   # of per_image tiles, a chunk's
        chunk = min(problem.n, sets * images)
        return cls(rows, per_image, chunk, count, images)

    def tiles(self, images):
        """The tiles (partial dWs) of a chunk of ``images`` images."""
        return ceil_div(images, self.images) * self.tiles_per_image

    @property
    def workspace(self):
        return 4 * self.count * self.tiles(self.chunk)

    def chunks(self, n):
        """(first image, images) of each chunk."""
        return [(first, min(self.chunk, n - first)) for first in range(0, n, self.chunk)]

    def fused_stages(self, problem):
        """The stages of ``problem``'s epilogue the last chunk's fold stores: all of them (alpha,
        blend) when the batch is one chunk; alpha only over several, whose first fold
        overwrites dW's prior contents (the core's pass blends then, from scratch)."""
        return len(problem.epilogue.stages) if self.chunk >= problem.n else 1

    def reducer(self, handle, problem):
        """fold(buffers.w, scratch, tiles, first, values=None) -> event: stage 2 over one chunk's
        tiles, the core's split sum in tile order, continuing from dW after the ``first``
        chunk; with ``values`` (buffers.epilogue_args: the last chunk), that fold stores
        ``problem``'s epilogue from a build of its own."""
        bare = SplitSum(handle)
        last = bare if problem.epilogue is None else SplitSum(handle, problem.epilogue)

        def fold(dw, scratch, tiles, first, values=None):
            return (bare if values is None else last)(scratch, dw, tiles, self.count,
                                                      accumulate=not first, values=values)
        return fold

# }}}
