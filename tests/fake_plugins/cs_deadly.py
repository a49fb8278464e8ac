"""Test-only solvers that only a worker process survives: a kernel that never finishes, and an
invoker that ends the process."""
import os

import pyopencl as cl
from convsolve import hookimpl
from cs_fake import FakeSolver
from cs_faulty import FAULTS

CONVSOLVE_SOLVER_API = ">=2.0,<3"


class HangsRunning(FakeSolver):
    name = "deadly.HangsRunning"
    wti = 0.9   # timed first, so the worker that dies is the first one

    @hookimpl
    def build_invoker(self, problem, handle):
        kernel = handle.build(FAULTS, "spin")

        def invoker(buffers, scratch):
            kernel.set_args(buffers.y)
            return [cl.enqueue_nd_range_kernel(handle.queue, kernel, (1,), None)]
        return invoker


class EndsProcess(FakeSolver):
    name = "deadly.EndsProcess"
    wti = 0.8

    @hookimpl
    def build_invoker(self, problem, handle):
        def invoker(buffers, scratch):
            os._exit(3)   # as a runtime that aborts would
        return invoker


class NeverCompletes(FakeSolver):
    """Stands in for a hung kernel without hanging the device: its event never completes
    until the test sets the events in PENDING."""

    name = "deadly.NeverCompletes"
    wti = 0.9

    @hookimpl
    def build_invoker(self, problem, handle):
        def invoker(buffers, scratch):
            PENDING.append(cl.UserEvent(handle.context))
            return [PENDING[-1]]
        return invoker


#: The user events NeverCompletes handed out, for the test to complete.
PENDING = []


def complete_pending():
    """Complete every event of PENDING and forget them (a test's clean-up: the queue runs on)."""
    while PENDING:
        PENDING.pop().set_status(cl.command_execution_status.COMPLETE)


@hookimpl
def convsolve_solvers():
    return [HangsRunning(), EndsProcess(), NeverCompletes()]
