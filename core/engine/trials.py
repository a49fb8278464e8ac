"""Find on the calls that follow: a plan's top candidates timed on the work it does, then recorded.

On a find-db miss, an online plan (the numpy API's, in the HYBRID and DYNAMIC_HYBRID find modes)
runs the learned ranking's pick at once, as immediate mode would, and where the model is unsure
(its auto budget names 2 or 3 candidates, as a budgeted find with ``limit="auto"`` times) runs
those candidates in turn on its next calls, TRIAL_CALLS times each, timing every call by its
events.  Each call computes the caller's result, so the benchmark costs only what the slower
candidates take on those calls: no call runs twice and no pass pauses to benchmark.  Once every
candidate has its times, the fastest (the smallest of each one's calls) and the others' are
recorded in the find-db as find records them (the untimed rest as predicted, not timed), the
handle's ranking moves to it, and the plan resolves to the winner.
"""
import logging
import threading

import pyopencl as cl

from ..db.find_db import FindDb, Record
from ..device.timing import elapsed_ms
from .solutions import PREDICTED, Solution

log = logging.getLogger("convsolve")

#: Calls each candidate runs before its times count: the smaller of two is kept, the first call
#: of a candidate may carry a driver's one-time work (PoCL compiles a work-group function then).
TRIAL_CALLS = 2


class Trials:
    """The candidates (name -> solver) a plan times on its calls, in turn, and what they
    measured; thread-safe."""

    def __init__(self, candidates, ranked):
        self.candidates = dict(candidates)
        self.ranked = list(ranked)   # the model's ranking: every candidate, predicted times
        self._order = [name for _ in range(TRIAL_CALLS) for name in self.candidates]
        self._pending = []           # (name, events) of calls not yet finished
        self._times = {name: [] for name in self.candidates}
        self._lock = threading.Lock()

    def next(self):
        """(name, solver) of the candidate the next call runs, or None when every one has run
        its calls."""
        with self._lock:
            while self._order and self._order[0] not in self.candidates:
                self._order.pop(0)
            if not self._order:
                return None
            name = self._order.pop(0)
            return name, self.candidates[name]

    def ran(self, name, events):
        """Note that a call of ``name`` enqueued ``events``."""
        with self._lock:
            self._pending.append((name, events))

    def drop(self, name, why):
        """Leave ``name`` out of the trials (it failed, or does not fit the caller's scratch)."""
        log.info("trials: %r left out: %s", name, why)
        with self._lock:
            self.candidates.pop(name, None)
            self._times.pop(name, None)

    def results(self):
        """The timed Solutions, fastest first, once every call has run and finished; else None.
        Calls still running are left to a later look (nothing waits here)."""
        with self._lock:
            still = []
            for name, events in self._pending:
                if events and events[-1].command_execution_status != cl.command_execution_status.COMPLETE:
                    still.append((name, events))
                elif name in self._times:
                    self._times[name].append(elapsed_ms(events))
            self._pending = still
            if self._order or still:
                return None
            by_name = {s.solver: s for s in self.ranked}
            timed = [Solution(name, by_name[name].family, min(times), by_name[name].workspace,
                              "benchmark") for name, times in self._times.items() if times]
            return sorted(timed, key=lambda s: s.time_ms)


def record(handle, key, trials, timed):
    """Store ``timed`` (Trials.results()) with the ranking's other candidates as predicted in
    the user find-db under ``key``, and in the handle's ranking; returns the ranking."""
    names = {s.solver for s in timed}
    predicted = [s for s in trials.ranked if s.solver not in names]
    FindDb().keep(handle.db_key, key, [Record(s.solver, s.family, s.time_ms, s.workspace)
                                       for s in timed]
                  + [Record(s.solver, s.family, None, s.workspace, failure=PREDICTED)
                     for s in predicted])
    ranking = timed + predicted
    log.info("trials %s: timed %s; fastest %r", key,
             ", ".join(f"{s.solver} {s.time_ms:.3f} ms" for s in timed), ranking[0].solver)
    handle.remember_ranking(key, ranking)
    return ranking
