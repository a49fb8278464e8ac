"""Test-only solvers that claim more than they do: strided problems their invokers get wrong,
fatally (check_solver must name the solver and the problem although the process dies, issue 18),
and an epilogue they say they fuse but never apply (issue 16), or apply in channels-first
layouts only (issue 31)."""
import os
from pathlib import Path

import pyopencl as cl
from convsolve import hookimpl
from convsolve_direct.naive import NaiveFwd
from cs_fake import FakeSolver

CONVSOLVE_SOLVER_API = ">=2.0,<3"
LIES = Path(__file__).parent / "lies.cl"
#: The problems AbortsLater ran in this process.
RAN = set()


class StrideLie(FakeSolver):
    """A 1x1 kernel that ignores the stride, accepting strided problems: writes far past y."""

    name = "lies.StrideLie"
    family = "lies"

    @hookimpl
    def is_applicable(self, problem):   # the lie: the stride is not checked
        return (problem.fil_h == problem.fil_w == 1 and problem.groups == 1
                and problem.conv.pads == ((0, 0), (0, 0)) and problem.conv.dilations == (1, 1))

    @hookimpl
    def build_invoker(self, problem, handle):
        kernel = handle.build(LIES, "pointwise_unstrided_fwd")
        size = (problem.n * problem.k * problem.in_h * problem.in_w,)

        def invoker(buffers, scratch):
            kernel.set_args(buffers.x, buffers.w, buffers.y, *problem.kernel_args())
            return [cl.enqueue_nd_range_kernel(handle.queue, kernel, size, None)]
        return invoker


class AbortsOnStride(FakeSolver):
    """Right on unstrided problems; on a strided one its invoker aborts the process, as glibc
    does on finding its heap corrupted by a kernel such as StrideLie's (deterministically)."""

    name = "lies.AbortsOnStride"
    family = "lies"

    @hookimpl
    def build_invoker(self, problem, handle):
        invoker = super().build_invoker(problem, handle)
        if problem.conv.strides != (1, 1):
            return lambda buffers, scratch: os.abort()
        return invoker


class AbortsLater(FakeSolver):
    """Aborts on the second problem it runs in a process, as a kernel whose corruption of the
    heap another problem's run finds: checked alone, that problem passes."""

    name = "lies.AbortsLater"
    family = "lies"

    @hookimpl
    def build_invoker(self, problem, handle):
        invoker = super().build_invoker(problem, handle)

        def run(buffers, scratch):
            RAN.add(problem.key())
            if len(RAN) > 1:
                os.abort()
            return invoker(buffers, scratch)
        return run


class EpilogueLie(FakeSolver):
    """Says it fuses every stage of an epilogue, but writes the bare convolution."""

    name = "lies.EpilogueLie"
    family = "lies"

    @hookimpl
    def fused_stages(self, problem):
        return len(problem.epilogue.stages)


class ChannelsLastEpilogueLie(NaiveFwd):
    """direct.NaiveFwd saying it fuses every problem's epilogue (as it does), but leaving it out
    of channels-last outputs (issue 31: check_solver checks every layout a solver claims)."""

    name = "lies.ChannelsLastEpilogueLie"
    family = "lies"

    @hookimpl
    def build_invoker(self, problem, handle, config):
        bare = problem.with_epilogue(None) if problem.y.channels_last else problem
        return super().build_invoker(bare, handle, config)


@hookimpl
def convsolve_solvers():
    return [StrideLie(), AbortsOnStride(), AbortsLater(), EpilogueLie()]
