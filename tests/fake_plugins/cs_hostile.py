"""Test-only solvers that break the contract at run time, one way each; find must exclude each
with its reason and still answer from the honest solvers."""
import threading

import numpy as np
import pyopencl as cl
from convsolve import hookimpl
from cs_fake import FakeSolver
from cs_faulty import FAULTS

CONVSOLVE_SOLVER_API = ">=2.0,<3"

#: Set by the test when it is done, so the hung build's thread can end.
RELEASE = threading.Event()


class Raises(FakeSolver):
    """Raises in the hook named by ``hook``."""

    hook = "is_applicable"

    def __init__(self, hook):
        self.hook, self.name = hook, f"hostile.RaisesIn_{hook}"

    def _maybe_raise(self, hook):
        if hook == self.hook:
            raise RuntimeError(f"planted failure in {hook}")

    @hookimpl
    def is_applicable(self, problem):
        self._maybe_raise("is_applicable")
        return True

    @hookimpl
    def get_wti(self, problem):
        self._maybe_raise("get_wti")
        return 0.5

    @hookimpl
    def workspace(self, problem):
        self._maybe_raise("workspace")
        return 0

    @hookimpl
    def build_invoker(self, problem, handle):
        self._maybe_raise("build_invoker")
        return super().build_invoker(problem, handle)


class NegativeWorkspace(FakeSolver):
    name = "hostile.NegativeWorkspace"
    workspace_bytes = -4


class NanWti(FakeSolver):
    name = "hostile.NanWti"
    wti = float("nan")


class NotCallable(FakeSolver):
    name = "hostile.NotCallable"

    @hookimpl
    def build_invoker(self, problem, handle):
        return 42


class ReturnsNone(FakeSolver):
    name = "hostile.ReturnsNone"

    @hookimpl
    def build_invoker(self, problem, handle):
        invoker = super().build_invoker(problem, handle)
        return lambda buffers, scratch: invoker(buffers, scratch) and None


class HangsBuilding(FakeSolver):
    name = "hostile.HangsBuilding"

    @hookimpl
    def build_invoker(self, problem, handle):
        RELEASE.wait()
        return super().build_invoker(problem, handle)


class Perturbs(FakeSolver):
    """Computes the convolution, then adds ``amount`` to y[0]."""

    amount = float("nan")

    def __init__(self, name, amount):
        self.name, self.amount = name, amount

    @hookimpl
    def build_invoker(self, problem, handle):
        conv = super().build_invoker(problem, handle)
        nudge = handle.build(FAULTS, "nudge")   # adds the amount to y[0]

        def invoker(buffers, scratch):
            nudge.set_args(buffers.y, np.uint64(0), np.float32(self.amount))
            return conv(buffers, scratch) + [
                cl.enqueue_nd_range_kernel(handle.queue, nudge, (1,), None)]
        return invoker


@hookimpl
def convsolve_solvers():
    return [*(Raises(hook) for hook in ("is_applicable", "get_wti", "workspace", "build_invoker")),
            NegativeWorkspace(), NanWti(), NotCallable(), ReturnsNone(), HangsBuilding(),
            Perturbs("hostile.WritesNan", float("nan")), Perturbs("hostile.SlightlyWrong", 0.5)]
