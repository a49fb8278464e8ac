"""Candidates that run an installed solver on another problem than find's: composite layout
candidates (layouts.py) and rank candidates (ranks.py).  What they share."""
from ..device.weights_cache import build_packing
from ..hookspecs import OPTIONAL_SOLVER_ATTRIBUTES
from ..solvers.calls import build_invoker, wti_of
from ..solvers.registry import registry, shape_refusal, solver_attribute
from .search import config_for


def wrapped_candidates(kind, problem, inner, skipped, policy, device, how):
    """``kind`` (a Wrapped subclass) around each solver that the registry refuses for
    ``problem`` only by its rank or layout (``shape_refusal``) and that is applicable to the
    problem ``inner``; that solver's reason in ``skipped`` (Registry.candidates') then names its
    candidate and ``how`` it runs it."""
    found = []
    for solver in registry().candidates(inner, policy, device)[0]:
        reason = skipped.get(solver.name)
        if reason is not None and reason == shape_refusal(solver, problem):
            found.append(kind(solver))
            skipped[solver.name] = f"{reason}; {found[-1].name} {how}"
    return found


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

    def inner_invoker(self, problem, handle):
        """Its solver's invoker of the problem it runs, with the config tuned there."""
        inner = self.inner_problem(problem)
        return build_invoker(self.inner, inner, handle, config_for(self.inner, inner, handle))

    def inner_packing(self, problem, handle):
        """Its solver's packing of the problem it runs (weights_cache.Built), or None."""
        inner = self.inner_problem(problem)
        return build_packing(self.inner, inner, handle, config_for(self.inner, inner, handle))
