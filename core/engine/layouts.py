"""Composite layout candidates: a solver that serves channels-first tensors only runs a problem
with channels-last ones on channels-first copies in scratch, the transposes timed with it.

For a problem with a channels-last tensor, each solver the registry refuses only for a layout
(``shape_refusal``) that is applicable to the same problem with every tensor channels-first
yields ``<name>/nchw``: each channels-last input transposed into scratch, the solver run on the
copies (its own workspace first in scratch), a channels-last output written into scratch and
transposed out (kernels/layout.cl).  The candidate answers the solver hooks, so find times,
records and ranks it as a solver; its workspace counts the copies, exactly.

Epilogues: a composite always computes the bare convolution (the inner channels-first problem
carries no epilogue, so the inner solver's ``fused_stages`` is never asked).  For a problem with
an epilogue, fusion.candidates wraps each composite of the bare problem in an unfused
``fusion.Candidate`` of the same name: the composite writes the convolution in the output's
own layout (into scratch when the epilogue reads the output's prior contents), then the core's
epilogue pass, which finds each element's channel in any layout, applies the whole epilogue on
that final output.  One design for every epilogue and direction, the residual z read in y's
layout as it is given, no transposes of z or of the prior output.
"""
import math
from importlib import resources

import numpy as np
import pyopencl as cl

from ..arith import ALIGN, ceil_div, round_up
from ..hookspecs import Packing
from ..problem import ALL_LAYOUTS, LAYOUTS, Problem, TensorDesc
from ..solvers.calls import events_of, workspace_of
from .wrapped import Wrapped, wrapped_candidates

KERNEL = resources.files("convsolve") / "kernels" / "layout.cl"
#: The suffix of a composite layout candidate's name: its solver on channels-first copies.
NCHW = "/nchw"
#: The WTI of a composite is its solver's times this (the transposes sweep each copied tensor
#: twice), so that the fallback ranking prefers a solver serving the layout itself.
TRANSPOSED_WTI = 0.8
#: The side of layout.cl's tile (its CS_LAYOUT_TILE default): on GPUs 16 x 16 work-items (else
#: 8 x 8), on other devices one work-item's private tile (layout.cl says why).
TILE = 16


def channels_first(problem):
    """``problem`` with every tensor in the channels-first layout of its rank (NCW, NCHW,
    NCDHW), the same logical shapes."""
    first = LAYOUTS[problem.spatial_dims][0]
    return Problem(problem.direction, *(TensorDesc(t.shape, t.dtype, first) for t in (
        problem.x, problem.w, problem.y)), problem.conv)


def composites(problem, skipped, policy=None, device=None):
    """The composite candidates of ``problem`` (none when it has an epilogue, given only to
    bare problems: fusion.candidates wraps them for one; none for an empty tensor or no
    channels-last tensor), given the reasons ``skipped`` of Registry.candidates; the reason of
    each solver that gets one then names it."""
    tensors = (problem.x, problem.w, problem.y)
    if problem.epilogue is not None or not all(t.size for t in tensors) or not any(
            t.channels_last for t in tensors):
        return []
    return wrapped_candidates(Composite, problem, channels_first(problem), skipped, policy,
                              device, "runs it on channels-first copies")


class Composite(Wrapped):
    """``solver`` on channels-first copies of a problem's channels-last tensors: transposes in,
    the solver, a transpose out; it answers the solver hooks as find needs them."""

    WTI_FACTOR, KIND = TRANSPOSED_WTI, "layout candidate"

    def __init__(self, solver):
        super().__init__(solver, NCHW)
        self.layouts = ALL_LAYOUTS

    def describe(self, problem):
        """What it runs, in explain's words."""
        copied = [name for name in "xwy" if getattr(problem, name).channels_last]
        return (f"composite: {self.inner.name} on channels-first copies of "
                f"{', '.join(copied)} (transposes timed with it)")

    def inner_problem(self, problem):
        return channels_first(problem)

    def _copies(self, problem, handle):
        """(the solver's workspace, {tensor name: offset of its channels-first copy}, bytes in
        all): the copies follow the solver's workspace, each at a multiple of ALIGN."""
        own = end = workspace_of(self.inner, channels_first(problem), handle)
        offsets = {}
        for name in "xwy":
            desc = getattr(problem, name)
            if desc.channels_last:
                offsets[name] = round_up(end, ALIGN)
                end = offsets[name] + desc.nbytes
        return own, offsets, end

    def workspace(self, problem, handle):
        return self._copies(problem, handle)[2]

    def build_invoker(self, problem, handle):
        return self._around(problem, handle, self.inner_invoker(problem, handle))

    def build_packing(self, problem, handle):
        """Its solver's packing of the channels-first problem (None where it has none); when w
        is channels-last, its channels-first copy is made in the packed buffer, after the
        solver's packed weights, and the solver packs from it."""
        built = self.inner_packing(problem, handle)
        if built is None:
            return None
        if not problem.w.channels_last:
            return Packing(built.nbytes, built.pack, self._around(problem, handle, built.invoker))
        at, transpose = round_up(built.nbytes, ALIGN), _transposer(problem, handle)

        def pack(w, packed):
            copy = packed.get_sub_region(at, problem.w.nbytes)
            return [transpose("w", w, copy, False)] + built.pack(
                copy, packed.get_sub_region(0, built.nbytes))
        return Packing(at + problem.w.nbytes, pack,
                       self._around(problem, handle, built.invoker, packed=built.nbytes))

    def _around(self, problem, handle, invoker, packed=0):
        """``invoker`` between the transposes: the solver's, or its packing's, which then takes
        the packed weights (``packed``: their bytes, at the start of the packed buffer, which
        also holds the channels-first copy of w; w is then not copied per call)."""
        own, offsets, _ = self._copies(problem, handle)
        transpose, out = _transposer(problem, handle), problem.direction.output

        def composite(buffers, scratch, *weights):
            # disjoint sub-buffers (a kernel given a buffer and its sub-buffer is undefined),
            # made for this call: one kept beyond it outlives a scratch its owner releases, and
            # NVIDIA's OpenCL crashes releasing a sub-buffer after its parent (RELIABILITY.md)
            copies = {name: scratch.get_sub_region(offset, getattr(problem, name).nbytes)
                      for name, offset in offsets.items() if not (packed and name == "w")}
            if packed:
                weights = (weights[0].get_sub_region(0, packed),)
            events = [transpose(name, getattr(buffers, name), copy, False)
                      for name, copy in copies.items() if name != out]
            events += events_of(self.inner.name, invoker(buffers._replace(**copies), (
                scratch.get_sub_region(0, own) if own else None), *weights))
            if out in copies:
                events.append(transpose(out, copies[out], getattr(buffers, out), True))
            return events
        return composite


def _transposer(problem, handle):
    """transpose(name, src, dst, to_last): ``problem``'s tensor ``name`` from ``src`` into
    ``dst``, to its channels-last order (``to_last``) or to channels-first (kernels/layout.cl)."""
    gpu = handle.is_gpu
    tile = TILE if not gpu or handle.device.max_work_group_size >= TILE * TILE else 8
    kernel = handle.build(KERNEL, "cs_layout" if gpu else "cs_layout_private",
                          {"CS_LAYOUT_TILE": tile})
    kernel.set_scalar_arg_dtypes([None, None, np.int32, np.int32, np.int32])

    def transpose(name, src, dst, to_last):
        n, c, *spatial = getattr(problem, name).shape
        s = math.prod(spatial)
        rows, cols = (c, s) if to_last else (s, c)
        kernel.set_args(src, dst, c, s, int(to_last))
        if gpu:
            size, local = (round_up(cols, tile), round_up(rows, tile), n), (tile, tile, 1)
        else:
            size, local = (ceil_div(cols, tile), ceil_div(rows, tile), n), (1, 1, 1)
        return cl.enqueue_nd_range_kernel(handle.queue, kernel, size, local)
    return transpose
