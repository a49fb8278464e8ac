"""Test-only plugin: a forward solver that never writes its output (verification must fail)."""
from convsolve import Direction, hookimpl

CONVSOLVE_SOLVER_API = ">=1.0,<2"


class Lazy:
    name = "wrong.Lazy"
    algorithm = "wrong"
    directions = (Direction.FORWARD,)
    dynamic = True

    @hookimpl
    def is_applicable(self, problem):
        return True

    @hookimpl
    def get_wti(self, problem):
        return 1.0

    @hookimpl
    def workspace(self, problem):
        return 0

    @hookimpl
    def build_invoker(self, problem, handle):
        return lambda buffers, scratch: []


@hookimpl
def convsolve_solvers():
    return [Lazy()]
