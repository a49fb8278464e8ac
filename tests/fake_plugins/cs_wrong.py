"""Test-only plugin: a forward solver that never writes its output (verification must fail)."""
from cs_contract import Base

from convsolve import hookimpl

CONVSOLVE_SOLVER_API = ">=2.0,<3"


class Lazy(Base):
    """Enqueues nothing (Base's invoker), so the output keeps whatever it held."""

    name = "wrong.Lazy"
    family = "wrong"

    @hookimpl
    def get_wti(self, problem):
        return 1.0


@hookimpl
def convsolve_solvers():
    return [Lazy()]
