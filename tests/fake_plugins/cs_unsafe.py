"""Test-only plugin: forward solvers with right results and a memory fault that Oclgrind or
check_solver's guard zones catch (on a real device, run them only through check_solver)."""
from pathlib import Path

import pyopencl as cl
from convsolve import hookimpl, round_up
from cs_fake import FakeSolver

CONVSOLVE_SOLVER_API = ">=2.0,<3"
UNSAFE = Path(__file__).parent / "unsafe.cl"


class WritesPastOutput(FakeSolver):
    """A `>` for `>=` tail guard over one work-item too many: writes one element past y."""

    name = "unsafe.WritesPastOutput"
    family = "unsafe"

    @hookimpl
    def build_invoker(self, problem, handle):
        kernel = handle.build(UNSAFE, "off_by_one_fwd")
        size = (problem.y.size + 1,)

        def invoker(buffers, scratch):
            kernel.set_args(buffers.x, buffers.w, buffers.y, *problem.kernel_args())
            return [cl.enqueue_nd_range_kernel(handle.queue, kernel, size, None)]
        return invoker


class EpilogueWritesPast(WritesPastOutput):
    """Says it fuses every epilogue stage; with an epilogue, it runs WritesPastOutput's kernel
    (no epilogue applied, one element past y), without one the naive forward (right)."""

    name = "unsafe.EpilogueWritesPast"

    @hookimpl
    def fused_stages(self, problem):
        return len(problem.epilogue.stages)

    @hookimpl
    def build_invoker(self, problem, handle):
        if problem.epilogue is None:
            return FakeSolver.build_invoker(self, problem, handle)
        return super().build_invoker(problem, handle)


class PairsPastOddOutput(FakeSolver):
    """Two outputs per work-item and no check of the second: one element past y on odd sizes."""

    name = "unsafe.PairsPastOddOutput"
    family = "unsafe"

    @hookimpl
    def build_invoker(self, problem, handle):
        kernel = handle.build(UNSAFE, "pairs_fwd")
        size = ((problem.y.size + 1) // 2,)

        def invoker(buffers, scratch):
            kernel.set_args(buffers.x, buffers.w, buffers.y, *problem.kernel_args())
            return [cl.enqueue_nd_range_kernel(handle.queue, kernel, size, None)]
        return invoker


class LocalRace(FakeSolver):
    """Its work-items race on one __local int (a result every value leaves right)."""

    name = "unsafe.LocalRace"
    family = "unsafe"

    @hookimpl
    def build_invoker(self, problem, handle):
        kernel = handle.build(UNSAFE, "local_race_fwd")
        size = (round_up(problem.y.size, 64),)

        def invoker(buffers, scratch):
            kernel.set_args(buffers.x, buffers.w, buffers.y, *problem.kernel_args())
            return [cl.enqueue_nd_range_kernel(handle.queue, kernel, size, (64,))]
        return invoker


class ReadsPastInput(FakeSolver):
    """Reads input channels in fours: on a group of 1 to 3 channels (mod 4), the last image's
    last channels are read past the end of x, up to 3 planes (their weights are zero)."""

    name = "unsafe.ReadsPastInput"
    family = "unsafe"

    @hookimpl
    def build_invoker(self, problem, handle):
        kernel = handle.build(UNSAFE, "overread_fwd")
        size = (problem.y.size,)

        def invoker(buffers, scratch):
            kernel.set_args(buffers.x, buffers.w, buffers.y, *problem.kernel_args())
            return [cl.enqueue_nd_range_kernel(handle.queue, kernel, size, None)]
        return invoker


@hookimpl
def convsolve_solvers():
    return [WritesPastOutput(), EpilogueWritesPast(), PairsPastOddOutput(), LocalRace(),
            ReadsPastInput()]
