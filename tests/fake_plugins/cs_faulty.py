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


class Nudger(FakeSolver):
    """The naive forward, then ``amount`` added to one element of ``tensor`` (its first, or
    with ``past`` the word after its end): 0.0 at the first is the honest control."""

    name = "faulty.Nudger"
    tensor, past, amount = "y", False, 0.0

    def amounts(self):
        while True:
            yield self.amount

    @hookimpl
    def build_invoker(self, problem, handle):
        conv = super().build_invoker(problem, handle)
        nudge = handle.build(FAULTS, "nudge")
        index = np.uint64(getattr(problem, self.tensor).size if self.past else 0)
        amounts = self.amounts()

        def invoker(buffers, scratch):
            events = conv(buffers, scratch)
            nudge.set_args(getattr(buffers, self.tensor), index, np.float32(next(amounts)))
            return events + [cl.enqueue_nd_range_kernel(handle.queue, nudge, (1,), None)]
        return invoker


class NonDeterministic(Nudger):
    """Claims determinism but nudges one output element differently on every run."""

    name = "faulty.NonDeterministic"

    def amounts(self):
        runs = 0
        while True:
            runs += 1
            yield 1e-7 * runs


class WrongResult(Nudger):
    """Adds 0.5 to its first output: wrong, and finite (no element unwritten, no NaN)."""

    name = "faulty.WrongResult"
    amount = 0.5


class ModifiesInput(Nudger):
    """Adds 1 to the first element of its input x."""

    name = "faulty.ModifiesInput"
    tensor, amount = "x", 1.0


class WritesPastInput(Nudger):
    """Adds 1 to the word after the end of its input x (a store one element too far)."""

    name = "faulty.WritesPastInput"
    tensor, past, amount = "x", True, 1.0


class RaisingApplicable(FakeSolver):
    """is_applicable raises on strided problems (with ``raises``; False: the control)."""

    name = "faulty.RaisingApplicable"
    raises = True

    @hookimpl
    def is_applicable(self, problem):
        if self.raises and problem.conv.strides != (1, 1):
            raise ValueError("planted: strides not understood")
        return True


class WtiOutOfRange(FakeSolver):
    """Estimates 1.5 of the device's peak (in (0, 1] or negative is the contract)."""

    name = "faulty.WtiOutOfRange"
    wti = 1.5


class NegativeWorkspace(FakeSolver):
    """Reports -8 bytes of workspace."""

    name = "faulty.NegativeWorkspace"
    workspace_bytes = -8


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
            SkipsPadding(), WrongResult(), ModifiesInput(), WritesPastInput(),
            RaisingApplicable(), WtiOutOfRange(), NegativeWorkspace(), Spreads(),
            SpreadsEverywhere()]
