"""Solution records, and how they are ranked without benchmarking: find-db hits, the learned
ranking and the WTI fallback."""
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..db.find_db import FindDb, Record
from ..device.handle import Handle
from ..errors import ContractError
from ..heuristics import ranking
from ..hookspecs import Solver
from ..problem import Problem
from ..solvers.calls import workspace_of, wti_of
from ..solvers.policy import Policy
from . import fusion

log = logging.getLogger("convsolve")

#: Estimated time of a fallback solution is this many ms divided by its WTI (MIOpen's convention).
FALLBACK_TIME_SCALE_MS = 10.0
#: The find-db's note on a solver ranked by prediction and not timed (budgeted find, trials).
PREDICTED = "predicted, not timed (budgeted find)"


@dataclass(frozen=True)
class Solution:
    """One ranked way to solve a problem.

    ``source`` says where ``time_ms`` comes from: ``'benchmark'`` (timed by this find),
    ``'find-db'`` (a user or system db record), ``'predicted'`` (the learned ranking's
    estimate) or ``'fallback'`` (estimated as 10 / WTI ms).
    """

    solver: str
    family: str
    time_ms: float
    workspace: int
    source: str

    @property
    def from_db(self) -> bool:
        """True when the solution came from a find-db record."""
        return self.source == "find-db"


def usable_records(records: Iterable[Record], applicable: Iterable[Solver],
                   skipped: Mapping[str, str]) -> list[Solution]:
    """Solutions from find-db records of timed solvers among ``applicable``.

    ``applicable`` and ``skipped`` are what ``Registry.candidates(problem)`` returned; the reason
    a record is dropped comes from ``skipped``.
    """
    names = {solver.name for solver in applicable}
    usable = []
    for record in records:
        if record.failure:
            log.debug("skip find-db record %r: %s", record.solver, record.failure)
        elif record.solver in names:
            usable.append(Solution(record.solver, record.family, record.time_ms,
                                   record.workspace, "find-db"))
        else:
            log.info("skip find-db record %r: %s", record.solver,
                     skipped.get(record.solver, "solver not installed"))
    return usable


def wti_times(applicable: Iterable[Solver], problem: Problem) -> dict[Solver, float]:
    """The fallback's time of each ``applicable`` solver: FALLBACK_TIME_SCALE_MS over its WTI;
    unknown WTI and broken hooks left out."""
    times = {}
    for solver in applicable:
        try:
            wti = wti_of(solver, problem)
        except ContractError as exc:
            log.warning("skip %r in fallback: %s", solver.name, exc)
            continue
        if wti >= 0:
            times[solver] = FALLBACK_TIME_SCALE_MS / wti
        else:
            log.info("skip %r in fallback: WTI unknown", solver.name)
    return times


def _ranked(handle: Handle, times: dict, problem: Problem, source: str) -> list[Solution]:
    """Solutions of ``source`` from each solver's time, fastest first; a solver whose workspace
    hook breaks is left out."""
    ranked = []
    for solver, time_ms in times.items():
        try:
            workspace = workspace_of(solver, problem, handle)
        except ContractError as exc:
            log.warning("skip %r in the ranking: %s", solver.name, exc)
            continue
        ranked.append(Solution(solver.name, solver.family, time_ms, workspace, source))
    return sorted(ranked, key=lambda s: s.time_ms)


def wti_fallback(handle: Handle, applicable: Iterable[Solver], problem: Problem) -> list[Solution]:
    """The ``applicable`` solvers ranked by WTI, without running anything; unknown WTI left out."""
    return _ranked(handle, wti_times(applicable, problem), problem, "fallback")


def predicted_ranking(handle: Handle, applicable: Iterable[Solver],
                      problem: Problem) -> list[Solution]:
    """The ``applicable`` solvers ranked by the learned model's predicted times (``source ==
    'predicted'``; heuristics.ranking), else by WTI (wti_fallback) where no model applies."""
    applicable = list(applicable)
    predicted = ranking.predicted_ms(handle.device, problem, applicable)
    if not predicted:
        return wti_fallback(handle, applicable, problem)
    for solver in (s for s in applicable if s.name not in predicted):
        log.info("skip %r in the ranking: the model knows it not and its WTI is unknown",
                 solver.name)
    return _ranked(handle, {s: predicted[s.name] for s in applicable if s.name in predicted},
                   problem, "predicted")


def ranked_without_benchmark(handle: Handle, problem: Problem, policy: Policy) -> list[Solution]:
    """Immediate mode's ranking of ``problem``'s candidates on ``handle`` under ``policy``: the
    find-db's usable records, else the learned ranking, else the WTI fallback (get_solutions)."""
    applicable, skipped = fusion.candidates(problem, policy, handle.device.name)
    solutions = usable_records(FindDb().records(handle.db_key, policy.db_key(problem)),
                               applicable, skipped)
    return solutions or predicted_ranking(handle, applicable, problem)
