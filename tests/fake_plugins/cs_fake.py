"""Test-only plugin: forward solvers with planted behaviours, all computing with the naive kernel."""
from importlib import resources
from pathlib import Path

import pyopencl as cl
from convsolve import Direction, hookimpl, round_up

CONVSOLVE_SOLVER_API = ">=2.0,<3"

NAIVE = resources.files("convsolve_direct") / "kernels" / "naive.cl"
BROKEN = Path(__file__).parent / "broken.cl"


class FakeSolver:
    """A forward solver backed by direct's naive kernel; subclasses plant one behaviour each."""

    family = "fake"
    directions = (Direction.FORWARD,)
    dynamic = False
    wti = 0.5
    workspace_bytes = 0

    @hookimpl
    def is_applicable(self, problem):
        return True

    @hookimpl
    def get_wti(self, problem):
        return self.wti

    @hookimpl
    def workspace(self, problem):
        return self.workspace_bytes

    @hookimpl
    def build_invoker(self, problem, handle):
        kernel = handle.build(NAIVE, "naive_fwd")
        size = (round_up(problem.y.size, 64),)

        def invoker(buffers, scratch):
            kernel.set_args(buffers.x, buffers.w, buffers.y, *problem.kernel_args())
            return [cl.enqueue_nd_range_kernel(handle.queue, kernel, size, (64,))]
        return invoker


class Good(FakeSolver):
    name = "fake.Good"


class Hungry(FakeSolver):
    name = "fake.Hungry"
    workspace_bytes = 1 << 40


class BadBuild(FakeSolver):
    name = "fake.BadBuild"

    @hookimpl
    def build_invoker(self, problem, handle):
        handle.build(BROKEN, "broken")


class RunFails(FakeSolver):
    name = "fake.RunFails"

    @hookimpl
    def build_invoker(self, problem, handle):
        def invoker(buffers, scratch):
            raise RuntimeError("planted run failure")
        return invoker


class NoWti(FakeSolver):
    name = "fake.NoWti"
    wti = -1.0


@hookimpl
def convsolve_solvers():
    return [Good(), Hungry(), BadBuild(), RunFails(), NoWti()]
