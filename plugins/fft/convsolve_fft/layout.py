"""A convolution as stride-1 correlations of transformed planes: axes, plane sets, workspace.

Along each axis (h, w) with filter R, dilation d, stride s and leading padding p, the taps of the
dilated filter lie at q = i * d < span = (R - 1) d + 1. Writing q = u * s + a (polyphase), a
strided convolution becomes a stride-1 one over `phases` phase channels per channel (a = j *
step: the multiples of gcd(d, s) below s, or each tap alone when span <= s) and `taps` =
ceil(span / s) taps u per phase:
  forward:          y[o]    = sum_a sum_u x_a[o + u] w_a[u],   x_a[m] = x[m s + a - p]
  backward-data:    dx_a[M] = sum_u dy[M - u] w_a[u],          dx[M s + a - p] = dx_a[M]
                            = sum_v dy[M + v - (taps - 1)] w_a[taps - 1 - v]
  backward-weights: w_a[u]  = sum_o dy[o] x_a[o + u],          w_a[u] = w[(u s + a) / d]
with w_a[u] = w[(u s + a) / d] where d divides u s + a (zero elsewhere). Each is computed in
tiles of `tile` outputs (`extent` of them: OH, or the phase rows of dx) from windows of
tile + taps - 1 inputs, each a correlation (backward-data's with the flipped filter), by
transforms of `length` >= that many points: spectra multiplied, one conjugated, summed over the
contracted channel and inverted (fft2d_forward.cl, cgemm.cl, fft2d_inverse.cl). A tile never
wraps onto an input it reads (make_axis), so no output is aliased.
"""
import math
from typing import NamedTuple

import numpy as np
import pyopencl as cl
from convsolve import Direction, ceil_div

from .transforms import smooth_even, spectrum_size

#: Images per chunk are chosen so that one chunk's input and output spectra fit this budget
#: (at least one image); the weights' spectra come on top (README: workspace).
CHUNK_BUDGET_BYTES = 64 * 2 ** 20
#: Workspace past which the solvers decline a problem.
MAX_WORKSPACE_BYTES = 4 * 2 ** 30
FWD, BWD, WRW = Direction.FORWARD, Direction.BACKWARD_DATA, Direction.BACKWARD_WEIGHTS


class Axis(NamedTuple):
    """One spatial axis of a problem, as the transforms see it."""

    size: int       # input extent (H)
    out: int        # output extent (OH)
    fil: int        # filter extent (R)
    pad: int        # leading padding
    stride: int
    dil: int
    phases: int     # phase channels per channel
    step: int       # phase a of channel index j is j * step
    taps: int       # taps per phase
    first: int      # backward-data: the first of dx's phase rows (0 otherwise)
    extent: int     # tiled outputs: OH, or dx's phase rows from `first` on
    tile: int       # outputs per tile
    tiles: int
    length: int     # transform length


def make_axis(direction, size, out, fil, pad, stride, dil, length=None):
    """The Axis of one dimension: a single tile (``length`` None: the shortest transform), or
    tiles as long as a ``length``-point transform allows."""
    span = (fil - 1) * dil + 1
    if span <= stride:       # every tap is a phase of its own (a 1x1 or sparse strided filter)
        step, phases, taps = dil, fil, 1
    else:                    # the phases are the multiples of gcd(d, s) below s
        step = math.gcd(dil, stride)
        phases, taps = stride // step, ceil_div(span, stride)
    first = 0                # dx's first phase row any phase writes
    if direction is BWD:
        first = max(0, ceil_div(pad - (phases - 1) * step, stride))
        extent = (size - 1 + pad) // stride + 1 - first
    else:
        extent = out
    if length is None:
        # Positions [d0, d1) of the window hold data; a correlation's output o < extent reads
        # o + u < extent + taps - 1, so a transform of L points wraps only reads at o + u >= L
        # onto o + u - L < d0, where the window holds zeros (padding), when L >= that bound.
        if direction is BWD:
            d0, d1 = max(0, taps - 1 - first), out + taps - 1 - first
        else:
            d0 = max(0, ceil_div(pad - (phases - 1) * step, stride))
            d1 = (size - 1 + pad) // stride + 1
        d1 = min(d1, extent + taps - 1)
        # backward-weights' outputs are the taps: each needs a point of its own, also those
        # whose window lies wholly in the padding (zeros, but written)
        length = smooth_even(max(d1, extent, extent + taps - 1 - d0,
                                 taps if direction is WRW else 0))
        return Axis(size, out, fil, pad, stride, dil, phases, step, taps, first, extent, extent,
                    1, length)
    tiles = ceil_div(extent, max(1, length - taps + 1))
    tile = ceil_div(extent, tiles)
    return Axis(size, out, fil, pad, stride, dil, phases, step, taps, first, extent, tile, tiles,
                length)


def problem_axis(problem, dim, length=None):
    """make_axis of ``problem``'s spatial dimension ``dim`` (0: h, 1: w)."""
    p = problem
    return make_axis(p.direction, p.in_sizes[dim], p.out_sizes[dim], p.fil_sizes[dim],
                     p.conv.pads[dim][0], p.conv.strides[dim], p.conv.dilations[dim], length)


def tensor_map(axis, role):
    """fft_axis fields (lo, hi, tile, base, mul, step, off, div, size) of one tensor role: read
    'x', 'w', 'dy' (backward-weights), 'dy_bwd' and 'w_flip' (backward-data: a correlation of dy
    with the flipped filter); written 'y', 'dx', 'dw'."""
    a, window = axis, axis.tile + axis.taps - 1
    return {
        "x": (0, window, a.tile, 0, a.stride, a.step, -a.pad, 1, a.size),
        "w": (0, a.taps, 0, 0, a.stride, a.step, 0, a.dil, a.fil),
        "w_flip": (0, a.taps, 0, 1 - a.taps, -a.stride, a.step, 0, a.dil, a.fil),
        "dy": (0, a.tile, a.tile, 0, 1, 0, 0, 1, a.out),
        "dy_bwd": (0, window, a.tile, a.first + 1 - a.taps, 1, 0, 0, 1, a.out),
        "y": (0, a.tile, a.tile, 0, 1, 0, 0, 1, a.out),
        "dx": (0, a.tile, a.tile, a.first, a.stride, a.step, -a.pad, 1, a.size),
        "dw": (0, a.taps, 0, 0, a.stride, a.step, 0, a.dil, a.fil),
    }[role]


class PlaneSet(NamedTuple):
    """A set of planes on the device: its fft_planes record and how many planes it holds."""

    buffer: cl.Buffer
    count: int


class Layout:
    """Where a problem's spectra lie in the workspace, its chunks, and its plane sets.

    The workspace holds three matrices of spectra (planes of 2 * Fp floats, stored by blocks of
    frequencies: fft_common.cl's FFT_SPECTRUM): the weights' W[k][c'] (K x Cg' planes,
    Cg' = C / G * phases), x's X[c'][n'] (C' = C * phases rows, a group's rows contiguous) and
    dy's DY[k][n'], with n' = (image, tile row, tile column) of a chunk, `nprime` columns.
    """

    def __init__(self, problem, axes=None):
        """``axes``: the (h, w) Axis pair of a tiling (problem_axis with a length; tiled_fft's
        search makes each once); None: one tile on each axis."""
        p = problem
        self.problem, self.direction = p, p.direction
        self.h, self.w = axes or (problem_axis(p, 0), problem_axis(p, 1))
        self.phases = self.h.phases * self.w.phases
        self.groups, self.kg = p.groups, p.k // p.groups
        self.cg = p.c // p.groups * self.phases           # Cg': a group's phase channels
        self.tiles = self.h.tiles * self.w.tiles
        self.f, self.fp = spectrum_size(self.h.length, self.w.length)
        self.plane = 2 * self.fp                           # floats per spectrum
        rows = p.c * self.phases + p.k                     # input and output spectra rows
        per_image = rows * self.tiles * self.plane * 4
        self.chunk = max(1, min(p.n, CHUNK_BUDGET_BYTES // per_image))
        self.nprime = self.chunk * self.tiles
        self.weights = 0
        # backward-data reads W^T: stored [c'][k] (ungrouped), its products run along k
        self.transposed = p.direction is BWD and p.groups == 1
        self.x_spectra = p.k * self.cg * self.plane
        self.dy_spectra = self.x_spectra + p.c * self.phases * self.nprime * self.plane
        self.floats = self.dy_spectra + p.k * self.nprime * self.plane

    @property
    def workspace(self):
        """The workspace in bytes."""
        return self.floats * 4

    def fits(self):
        """Whether the kernels' 32-bit offsets and MAX_WORKSPACE_BYTES allow the problem."""
        return self.floats < 2 ** 31 and self.workspace <= MAX_WORKSPACE_BYTES

    def chunks(self):
        """(first image, images) of each chunk."""
        return [(n0, min(self.chunk, self.problem.n - n0))
                for n0 in range(0, self.problem.n, self.chunk)]

    # {{{ plane sets: fft_planes records (fft_common.cl)

    def _record(self, count, tensor, spectrum, planes, extent, role):
        fields = list(count) + list(tensor) + list(spectrum) + [planes, extent]
        return np.array(fields + list(tensor_map(self.h, role)) + list(tensor_map(self.w, role)),
                        np.int32)

    def weight_planes(self, role):
        """W[k][c'] (W[c'][k] when ``transposed``) from or to w (K, C/G, R, S): coordinates
        (k, c, a_h, a_w)."""
        p, ph, pw = self.problem, self.h.phases, self.w.phases
        count = (p.k, p.c // p.groups, ph, pw, 1, 1)
        spectrum = ((1, ph * pw * p.k, pw * p.k, p.k, 0, 0) if self.transposed
                    else (self.cg, ph * pw, pw, 1, 0, 0))
        return self._record(count, (p.c // p.groups * p.fil_h * p.fil_w, p.fil_h * p.fil_w),
                            spectrum, p.k * self.cg, p.w.size, role), p.k * self.cg

    def image_planes(self, images, channels, role):
        """Spectra rows [channel'][n'] of a chunk of ``images`` from or to an NCHW tensor of
        ``channels`` channels (x or dx: with phases; dy: without): coordinates
        (image, channel, a_h, a_w, tile row, tile column)."""
        phased = role in ("x", "dx")
        ph, pw = (self.h.phases, self.w.phases) if phased else (1, 1)
        th, tw = self.h.tiles, self.w.tiles
        size = self.h.size * self.w.size if phased else self.h.out * self.w.out
        n = self.nprime
        count = (images, channels, ph, pw, th, tw)
        spectrum = (th * tw, ph * pw * n, pw * n, n, tw, 1)
        extent = self.problem.n * channels * size
        return self._record(count, (channels * size, size), spectrum, channels * ph * pw * n,
                            extent, role), images * channels * ph * pw * th * tw

    # }}}


def upload(handle, record_and_count):
    """A PlaneSet on ``handle``'s device from (record, count)."""
    record, count = record_and_count
    buffer = cl.Buffer(handle.context, cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR,
                       hostbuf=record)
    return PlaneSet(buffer, count)
