"""Test-only plugin: a forward solver that never writes its output (verification must fail)."""
import pyopencl as cl
from convsolve import hookimpl
from cs_contract import Base

CONVSOLVE_SOLVER_API = ">=2.0,<3"


class Lazy(Base):
    """Enqueues only a marker, so the output keeps whatever it held."""

    name = "wrong.Lazy"
    family = "wrong"

    @hookimpl
    def get_wti(self, problem):
        return 1.0

    @hookimpl
    def build_invoker(self, problem, handle):
        return lambda buffers, scratch: [cl.enqueue_marker(handle.queue)]


@hookimpl
def convsolve_solvers():
    return [Lazy()]
