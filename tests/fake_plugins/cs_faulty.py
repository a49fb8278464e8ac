"""Test-only solvers, each with one planted fault that check_solver must catch (and one honest one)."""
from pathlib import Path

import numpy as np
import pyopencl as cl
from convsolve import hookimpl
from cs_fake import NAIVE, FakeSolver

CONVSOLVE_SOLVER_API = ">=2.0,<3"
FAULTS = Path(__file__).parent / "faults.cl"


class Scribbler(FakeSolver):
    """Correct output, and writes ``written`` bytes of the workspace it reports as ``workspace_bytes``."""

    name = "faulty.HonestWorkspace"
    workspace_bytes = 1024
    written = 1024

    @hookimpl
    def build_invoker(self, problem, handle):
        conv = super().build_invoker(problem, handle)
        scribble = handle.build(FAULTS, "scribble")

        def invoker(buffers, scratch):
            events = conv(buffers, scratch)
            if self.written:
                scribble.set_args(scratch)
                events.append(cl.enqueue_nd_range_kernel(
                    handle.queue, scribble, (self.written // 4,), None))
            return events
        return invoker


class OutOfBounds(Scribbler):
    name = "faulty.OutOfBounds"
    written = 1024 + 512   # past the workspace, inside the guard zone check_solver adds


class UnusedWorkspace(Scribbler):
    name = "faulty.UnusedWorkspace"
    written = 0


class WrongOnOddSizes(FakeSolver):
    """Rounds the launch down to whole work-groups, so odd output sizes lose their tail."""

    name = "faulty.WrongOnOddSizes"

    @hookimpl
    def build_invoker(self, problem, handle):
        kernel = handle.build(NAIVE, "naive_fwd")
        size = (problem.y.size // 64 * 64,)

        def invoker(buffers, scratch):
            if not size[0]:
                return []
            kernel.set_args(buffers.x, buffers.w, buffers.y, *problem.kernel_args())
            return [cl.enqueue_nd_range_kernel(handle.queue, kernel, size, (64,))]
        return invoker


class NonDeterministic(FakeSolver):
    """Claims determinism but nudges one output element differently on every run."""

    name = "faulty.NonDeterministic"

    @hookimpl
    def build_invoker(self, problem, handle):
        conv = super().build_invoker(problem, handle)
        perturb = handle.build(FAULTS, "perturb")
        runs = []

        def invoker(buffers, scratch):
            runs.append(1)
            perturb.set_args(buffers.y, np.float32(1e-7 * len(runs)))
            return conv(buffers, scratch) + [
                cl.enqueue_nd_range_kernel(handle.queue, perturb, (1,), None)]
        return invoker


class SkipsPadding(FakeSolver):
    """Right on finite inputs, but skips padded taps: an inf weight at the border gives inf, not
    the reference's NaN (0 * inf)."""

    name = "faulty.SkipsPadding"

    @hookimpl
    def build_invoker(self, problem, handle):
        kernel = handle.build(FAULTS, "skip_padding_fwd")
        size = (problem.y.size,)

        def invoker(buffers, scratch):
            kernel.set_args(buffers.x, buffers.w, buffers.y, *problem.kernel_args())
            return [cl.enqueue_nd_range_kernel(handle.queue, kernel, size, None)]
        return invoker


class Spreads(FakeSolver):
    """nonfinite = "spread": the naive forward, then each run of ``span`` outputs (None: an
    output plane, a transform's reach; 0: the whole output) holding a non-finite value made
    all NaN."""

    name = "faulty.Spreads"
    nonfinite = "spread"
    span = None

    @hookimpl
    def build_invoker(self, problem, handle):
        conv = super().build_invoker(problem, handle)
        spoil = handle.build(FAULTS, "spoil")
        span = self.span if self.span is not None else problem.out_h * problem.out_w
        span = span or problem.y.size

        def invoker(buffers, scratch):
            events = conv(buffers, scratch)
            spoil.set_args(buffers.y, np.uint32(span))
            return events + [cl.enqueue_nd_range_kernel(
                handle.queue, spoil, (problem.y.size // span,), None)]
        return invoker


class SpreadsEverywhere(Spreads):
    """Spreads a non-finite value over the whole output: images and channels no non-finite
    input reaches too."""

    name = "faulty.SpreadsEverywhere"
    span = 0


@hookimpl
def convsolve_solvers():
    return [Scribbler(), OutOfBounds(), UnusedWorkspace(), WrongOnOddSizes(), NonDeterministic(),
            SkipsPadding(), Spreads(), SpreadsEverywhere()]
