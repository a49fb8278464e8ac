"""The frequency-domain products of each direction, as launches of cgemm.cl.

With W[k][c'], X[c'][n'] and DY[k][n'] the spectra of layout.Layout, per group and frequency:
  forward:          Y[k][n']  = sum_c' conj(W[k][c']) X[c'][n']     (a correlation)
  backward-data:    DX[c'][n'] = sum_k conj(W[k][c']) DY[k][n']      (W of the flipped filter)
  backward-weights: DW[k][c'] = sum_n' conj(DY[k][n']) X[c'][n']    (over every chunk)
"""
from importlib import resources

import numpy as np
import pyopencl as cl
from convsolve import ceil_div, round_up

from .layout import BWD, FWD

KERNELS = resources.files(__package__) / "kernels"


class ComplexGemm:
    """cgemm.cl built for one config; a call enqueues the product of one chunk."""

    def __init__(self, handle, layout, config):
        self.queue, self.layout = handle.queue, layout
        self.tm, self.tn, self.gv, self.gl = (config[k] for k in ("TM", "TN", "GV", "GL"))
        self.kernel = handle.build(KERNELS / "cgemm.cl", "cgemm",
                                   {"GV": self.gv, "TM": self.tm, "TN": self.tn, "GL": self.gl})

    def __call__(self, scratch, columns, accumulate=False):
        """The product of a chunk whose spectra have ``columns`` columns n' (of layout.nprime)."""
        lay = self.layout
        m, n, k, a, b, c = _operands(lay, columns)
        blocks_n = ceil_div(n, self.tn)
        self.kernel.set_args(
            np.int32(m), np.int32(n), np.int32(k), np.int32(blocks_n),
            scratch, *map(np.int32, a), scratch, *map(np.int32, b), scratch, *map(np.int32, c),
            np.int32(accumulate), np.int32(lay.fp))
        size = (ceil_div(m, self.tm) * blocks_n, round_up(lay.fp // self.gv, self.gl),
                lay.groups)
        return cl.enqueue_nd_range_kernel(self.queue, self.kernel, size, (1, self.gl, 1))


def _operands(lay, columns):
    """(M, N, K, A, B, C) of a direction's product, C = conj(A) B: A, B, C as (offset in floats,
    planes of the matrix, group, row and column strides in planes)."""
    kg, cg, n, p = lay.kg, lay.cg, lay.nprime, lay.problem
    w_planes, x_planes, dy_planes = p.k * cg, p.c * lay.phases * n, p.k * n
    w = (lay.weights, w_planes, kg * cg, cg, 1)               # W[k][c']  rows k
    x = (lay.x_spectra, x_planes, cg * n, n, 1)               # X[c'][n'] rows c'
    dy = (lay.dy_spectra, dy_planes, kg * n, n, 1)            # DY[k][n'] rows k
    if lay.direction is FWD:
        return kg, columns, cg, w, x, dy
    if lay.direction is BWD:
        w_t = ((lay.weights, w_planes, 0, kg, 1) if lay.transposed   # stored W[c'][k]
               else (lay.weights, w_planes, kg * cg, 1, cg))        # W^T of W[k][c']
        return cg, columns, kg, w_t, dy, x
    x_t = (lay.x_spectra, x_planes, cg * n, 1, n)             # X^T: element (n', c')
    return kg, cg, columns, dy, x_t, w
