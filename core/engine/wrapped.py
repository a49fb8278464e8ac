"""Candidates that run an installed solver on another problem than find's: composite layout
candidates (layouts.py) and rank candidates (ranks.py).  What they share."""
from ..hookspecs import OPTIONAL_SOLVER_ATTRIBUTES
from ..solvers.calls import wti_of
from ..solvers.registry import solver_attribute


class Wrapped:
    """``solver`` run on ``inner_problem(problem)`` (a subclass defines it), named ``<solver's
    name><suffix>``: the solver's family, directions, dynamism and optional attributes, its
    applicability on that problem, and its WTI there times the subclass's WTI_FACTOR."""

    WTI_FACTOR = 1.0
    KIND = "candidate"   # its repr's word

    def __init__(self, solver, suffix):
        self.inner, self.name = solver, solver.name + suffix
        self.family, self.directions, self.dynamic = solver.family, solver.directions, \
            solver.dynamic
        for attribute in OPTIONAL_SOLVER_ATTRIBUTES:
            setattr(self, attribute, solver_attribute(solver, attribute))

    def __repr__(self):
        return f"<{self.KIND} {self.name!r}>"

    def inner_problem(self, problem):
        """What its solver runs (an exhaustive find tunes the solver there)."""
        raise NotImplementedError

    def is_applicable(self, problem):
        return self.inner.is_applicable(self.inner_problem(problem))

    def get_wti(self, problem):
        wti = wti_of(self.inner, self.inner_problem(problem))
        return wti * self.WTI_FACTOR if wti > 0 else wti
