"""Convolution as grouped matrix products: the launch plans the GEMM solvers share.

Per image n and group g, with Cg = C/G, Kg = K/G, the column matrix col[n, g] is
(Cg*R*S) x (OH*OW): im2col of x, or x itself for a 1x1, stride-1, unpadded filter. Then
  forward:          y[n, g]  = W[g] col[n, g]                    (Kg x OHOW)
  backward-data:    col[n, g] = W[g]^T dy[n, g], then col2im     (x itself for the plain 1x1)
  backward-weights: dW[g]   = sum over n of dy[n, g] col[n, g]^T
Images go in chunks that fit the workspace; within a chunk, the groups and images of one
product are batched into one GEMM launch along whichever of the two needs fewer launches.
Backward-weights with columns writes one partial dW per image of the chunk (batched), then
sum_images adds them up in image order; without columns (plain 1x1, no workspace) the products
accumulate into dW image after image.  Both orders are fixed: results are deterministic.
"""
from typing import NamedTuple

from convsolve import Direction

from . import blas
from .blas import Columns, Gemm, SumImages, images_per_chunk, padded_pitch


class View(NamedTuple):
    """Matrices in a buffer: matrix (image i, group g) starts at offset + i*image + g*group."""

    buffer: object
    offset: int
    ld: int
    image: int
    group: int

    def at(self, image=0, group=0):
        return View(self.buffer, self.offset + image * self.image + group * self.group,
                    self.ld, self.image, self.group)


def grouped_gemm(gemm, mnk, beta, a, b, c, images, groups):
    """One GEMM per (image, group), batched into min(images, groups) launches; returns events."""
    m, n, k = mnk
    if images <= groups:   # a launch per image, its groups batched
        return [gemm(m, n, k, 1.0, beta, *(_batch(v.at(image=i), v.group) for v in (a, b, c)),
                     batch=groups) for i in range(images)]
    return [gemm(m, n, k, 1.0, beta, *(_batch(v.at(group=g), v.image) for v in (a, b, c)),
                 batch=images) for g in range(groups)]


def _batch(view, stride):
    return (view.buffer, view.offset, view.ld, stride)


def _partial_elements(problem):
    """Elements of one image's partial dW (every group): K * C/G * R * S."""
    return problem.k * (problem.c // problem.groups) * problem.fil_h * problem.fil_w


def bytes_per_image(problem):
    """Workspace bytes one image of a chunk takes: its column matrices (every group), and for
    backward-weights its partial dW."""
    cg_rs = problem.c // problem.groups * problem.fil_h * problem.fil_w
    columns = problem.groups * cg_rs * padded_pitch(problem.out_h * problem.out_w) * 4
    partial = _partial_elements(problem) * 4 if problem.direction is Direction.BACKWARD_WEIGHTS else 0
    return columns + partial


def chunk_images(problem):
    """Images per chunk: as many as COLUMN_BUDGET_BYTES holds, at least one."""
    return images_per_chunk(problem, bytes_per_image(problem), blas.COLUMN_BUDGET_BYTES)


def workspace_bytes(problem):
    """The exact workspace of a solver that goes through column matrices: one chunk's worth."""
    return chunk_images(problem) * bytes_per_image(problem)


def fits_int32(problem, use_columns):
    """True when every element offset the kernels take (tensors, and the workspace when
    ``use_columns``) fits their 32-bit int arguments."""
    largest = max(problem.x.size, problem.w.size, problem.y.size,
                  workspace_bytes(problem) // 4 if use_columns else 0)
    return largest <= 2 ** 31 - 1


def build_plan(problem, handle, use_columns):
    """The invoker computing ``problem`` with GEMMs, through column matrices when ``use_columns``.

    Without columns (1x1, stride 1, no padding) x / dx serve as the column matrices directly.
    """
    p, g = problem, problem.groups
    kg, hw, ohow = p.k // g, p.in_h * p.in_w, p.out_h * p.out_w
    chunk = chunk_images(p) if use_columns else p.n
    cols = Columns(handle, p, chunk) if use_columns else None
    cg_rs = p.c // g * p.fil_h * p.fil_w
    direction = p.direction
    gemm = Gemm(handle, trans_a=direction is Direction.BACKWARD_DATA,
                trans_b=direction is Direction.BACKWARD_WEIGHTS)
    batched_wrw = use_columns and direction is Direction.BACKWARD_WEIGHTS
    sum_images = SumImages(handle) if batched_wrw else None
    partial_base = chunk * g * cols.stride if use_columns else 0   # elements, after the columns
    partial_size = _partial_elements(p)

    def column_view(scratch, x, n0):
        if use_columns:
            return View(scratch, 0, cols.ld, g * cols.stride, cols.stride)
        return View(x, n0 * p.c * hw, hw, p.c * hw, cg_rs * hw)

    def invoker(buffers, scratch):
        events = []
        weights = View(buffers.w, 0, cg_rs, 0, kg * cg_rs)
        for n0 in range(0, p.n, chunk):
            count = min(chunk, p.n - n0)
            outputs = View(buffers.y, n0 * p.k * ohow, ohow, p.k * ohow, kg * ohow)
            col = column_view(scratch, buffers.x, n0)
            if direction is Direction.BACKWARD_DATA:
                events += grouped_gemm(gemm, (cg_rs, ohow, kg), 0.0, weights, outputs, col,
                                       count, g)
                if use_columns:
                    events.append(cols.col2im(scratch, buffers.x, n0, count))
                continue
            if use_columns:
                events.append(cols.im2col(buffers.x, n0, count, scratch))
            if direction is Direction.FORWARD:
                events += grouped_gemm(gemm, (kg, ohow, cg_rs), 0.0, weights, col, outputs,
                                       count, g)
            elif batched_wrw:  # one partial dW per image, then their sum in image order
                partials = View(scratch, partial_base, cg_rs, partial_size, kg * cg_rs)
                events += grouped_gemm(gemm, (kg, cg_rs, ohow), 0.0, outputs, col, partials,
                                       count, g)
                events.append(sum_images(scratch, partial_base, count, partial_size,
                                         buffers.w, n0 > 0))
            else:  # backward-weights without workspace: accumulate image after image into dW
                for i in range(count):
                    events += grouped_gemm(gemm, (kg, cg_rs, ohow), 0.0 if n0 + i == 0 else 1.0,
                                           outputs.at(image=i), col.at(image=i), weights, 1, g)
        return events
    return invoker
