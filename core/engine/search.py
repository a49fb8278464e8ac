"""Config search for a tunable solver on one problem, and which config the solver builds now.
A search times configs, fails those whose output disagrees with the default config's, and keeps
every trial in the perf-db.

Two strategies, after the default config and the configs that won the solver's searches on other
problems of the device (PerfDb.winners: likely good, and already built, so they cost a few runs
each).  ``exhaustive`` times every valid config.
``random-local`` (what ``auto`` picks when the space holds more valid configs than the budget)
times the default and a random sample, then walks the neighbourhood of the best config so far
(one parameter one step along its value list), as Kernel Tuner's and CLTune's local searches do,
and samples at random again when no untried neighbour is left.  Both stop at the budget: configs,
seconds, or ``patience`` timed configs in a row that do not beat the best by IMPROVEMENT.
Where builds go ahead (BUILD_AHEAD: a Dask cluster's timing worker on a driver whose binaries
convsolve caches), the default is built first where the search runs (the programs that every
config of a multi-program solver shares are then in the cache, not built by each compile
worker at once), then the winners and the first batch go to the compile workers in one round
(the first batch never depends on a timing), each later batch in a round of its own, every
config once.
A search draws a progress bar on stderr only where PROGRESS asks for one (the command does).
"""
import contextvars
import itertools
import logging
import os
import random
import sys
import time
from dataclasses import dataclass, field

import numpy as np
import tqdm

from .. import env
from ..db.perf_db import PerfDb, Trial
from ..device.timing import time_invoker
from ..errors import ConvsolveError, ValidationError
from ..reference import relative_error
from ..solvers.calls import config_refusal, default_config_of, is_tunable, space_of, workspace_of
from ..solvers.registry import solver_attribute
from ..tuning import config_key
from .parallel import build_ahead, call_all
from .verify import OutputCheck, read

log = logging.getLogger("convsolve")

STRATEGIES = ("auto", "exhaustive", "random-local")
#: A config must be this much faster than the best so far to count as an improvement.
IMPROVEMENT = 0.01
#: The first round of random-local: this fraction of the config budget drawn at random.
RANDOM_FRACTION = 0.4
#: A config whose first timed run is this many times the best so far is sampled no further.
CUTOFF_FACTOR = 2.0
#: Whether a search draws a progress bar (tqdm, on stderr): False, what library calls get;
#: "auto" when stderr is a terminal; True always.  `convsolve conv` sets it for its finds.
PROGRESS = contextvars.ContextVar("convsolve_search_progress", default=False)
#: A search's bar appears once the search has run this long, so that short ones draw nothing.
PROGRESS_DELAY_S = 1.0


@dataclass(frozen=True)
class Budget:
    """How much one search may spend: configs timed, wall seconds, and configs without gain
    (None: unbounded)."""

    configs: int | None = 48
    seconds: float | None = 30.0
    patience: int | None = 12

    @classmethod
    def from_env(cls, unbounded=False):
        """The budget CONVSOLVE_TUNING_BUDGET_CONFIGS, _S and _PATIENCE set; ``unbounded``
        (TRUST_VERIFY_FULL) lifts all three."""
        if unbounded:
            return cls(None, None, None)
        return cls(env.integer(env.TUNING_BUDGET_CONFIGS, minimum=1),
                   env.positive_number(env.TUNING_BUDGET_S),
                   env.integer(env.TUNING_PATIENCE, minimum=1))


@dataclass
class Outcome:
    """What one search found: every trial, the default's and the best one, and why it stopped."""

    solver: str
    default: Trial
    best: Trial
    trials: list = field(default_factory=list)
    stopped: str = ""

    @property
    def speedup(self):
        """The default config's time over the best's."""
        return self.default.time_ms / self.best.time_ms


class _Search:
    """One search's state: what was tried, the reference output, the budget spent."""

    def __init__(self, handle, problem, solver, buffers, scratch, budget):
        self.handle, self.problem, self.solver = handle, problem, solver
        self.buffers, self.scratch, self.budget = buffers, scratch, budget
        self.space = space_of(solver, problem, handle)
        self.tolerance = solver_attribute(solver, "tolerance")
        self.trials = {}          # config key -> Trial
        self.reference = None     # the default config's output
        self.best = None
        self.since_best = 0       # timed configs since the best improved
        self.ahead = set()        # keys of the configs handed to build_ahead
        self.started = time.monotonic()
        self.level = env.integer(env.COMPILE_PARALLEL_LEVEL, minimum=1) or os.cpu_count() or 1
        progress = PROGRESS.get()
        self.bar = tqdm.tqdm(
            total=min(n for n in (budget.configs, self.space.size()) if n is not None),
            desc=f"tune {solver.name}", unit="config", file=sys.stderr, leave=False,
            delay=PROGRESS_DELAY_S, disable=None if progress == "auto" else not progress)

    def usable(self, config):
        key = config_key(config)
        return key not in self.trials and config_refusal(
            self.solver, self.problem, self.handle, config, self.space) is None

    def timed(self):
        return sum(1 for trial in self.trials.values() if trial.time_ms is not None)

    def exhausted_budget(self):
        """Why the search must stop now, or ''."""
        budget = self.budget
        if budget.configs is not None and len(self.trials) >= budget.configs:
            return f"budget of {budget.configs} configs spent"
        if budget.seconds is not None and time.monotonic() - self.started > budget.seconds:
            return f"budget of {budget.seconds:g} s spent"
        if budget.patience is not None and self.since_best >= budget.patience:
            return f"no gain in {budget.patience} configs (patience)"
        return ""

    def room(self):
        """Configs the budget still allows (None: any number)."""
        return None if self.budget.configs is None else self.budget.configs - len(self.trials)

    def build_ahead(self, configs):
        """Hand the usable ``configs`` not handed before, as many as the budget allows, to
        build_ahead (other processes build them where BUILD_AHEAD is set), in one round."""
        fresh = {config_key(c): c for c in configs if self.usable(c)}
        fresh = [c for key, c in fresh.items() if key not in self.ahead][:self.room()]
        self.ahead.update(config_key(c) for c in fresh)
        build_ahead([(self.solver.name, self.problem.key(), c) for c in fresh])

    def run(self, configs):
        """Build ``configs`` in parallel, then time and check each; records a Trial for each."""
        configs = [c for c in configs if self.usable(c)][:self.room()]
        by_key = {config_key(c): c for c in configs}
        self.build_ahead(configs)
        limit_s = env.positive_number(env.FIND_BUILD_TIMEOUT_S)
        built = call_all(lambda key: self.handle.invoker(self.solver, self.problem, by_key[key]),
                         list(by_key), self.level, limit_s)
        for key, config in by_key.items():
            invoker, error = built[key]
            if error is not None:
                self.record(config, None, f"failed to build: {getattr(error, 'reason', error)}")
            else:
                self.time(config, invoker)
            if self.exhausted_budget():
                break

    def time(self, config, invoker):
        cutoff = None if self.best is None else self.best.time_ms * CUTOFF_FACTOR
        try:
            time_ms = time_invoker(invoker, self.buffers, self.scratch,
                                   env.positive_number(env.FIND_SOLVER_BUDGET_MS), cutoff,
                                   env.positive_number(env.FIND_RUN_TIMEOUT_S))
        except ConvsolveError as exc:
            self.record(config, None, f"failed to run: {exc}")
            return
        output = read(self.handle, self.problem, self.buffers, self.problem.direction.output)
        if self.reference is None:
            self.reference = output
        else:
            error = _output_error(output, self.reference)
            if not error < self.tolerance:
                self.record(config, None, f"wrong output: relative error {error:.3g} against the "
                                          f"default config's (tolerance {self.tolerance:g})")
                return
        self.record(config, time_ms, None)

    def record(self, config, time_ms, failure):
        trial = Trial(dict(config), time_ms, failure)
        self.trials[config_key(config)] = trial
        self.bar.update()
        if failure:
            log.info("tune %r %s: %s: %s", self.solver.name, self.problem.key(), config, failure)
            return
        log.debug("tune %r %s: %s: %.4f ms", self.solver.name, self.problem.key(), config,
                  time_ms)
        if self.best is None or time_ms < self.best.time_ms * (1 - IMPROVEMENT):
            self.best, self.since_best = trial, 0
            self.bar.set_postfix_str(f"best {time_ms:.4f} ms", refresh=False)
        else:
            self.since_best += 1


def _output_error(output, reference):
    """relative_error of two float32 outputs, in float32 (3x faster; tolerances are 5e-6 at the
    least) unless its squares overflow or vanish there, then in float64."""
    with np.errstate(all="ignore"):
        error = relative_error(output, reference, np.float32)
    held = np.isfinite(error) and (error > 0.0 or np.array_equal(output, reference))
    return error if held else relative_error(output, reference)


def _check_default(state, default):
    """Time the default config first and check it against the float64 reference (sampled): the
    outputs of other configs are compared with its output."""
    state.run([default])
    trial = state.trials[config_key(default)]
    if trial.failure:
        raise ConvsolveError(f"{state.solver.name!r}: its default config {default} "
                             f"{trial.failure}")
    fault = OutputCheck(state.handle, state.problem, state.buffers, True).fault(state.tolerance)
    if fault:
        raise ConvsolveError(f"{state.solver.name!r}: its default config {default}: {fault}")
    return trial


def _exhaustive(state):
    """Batches of configs for exhaustive: the whole space in rounds, so that the budget is
    checked between them."""
    configs, step = list(state.space), max(state.level, 4)
    for start in range(0, len(configs), step):
        yield configs[start:start + step]


def _random_local(state, rng):
    """Batches of configs for random-local: a random round, then neighbourhoods of the best."""
    batch = max(state.level, 4)
    first = max(batch, int(RANDOM_FRACTION * (state.budget.configs or 64)))
    yield state.space.sample(first, rng)
    while True:
        ranked = sorted((t for t in state.trials.values() if t.time_ms is not None),
                        key=lambda t: t.time_ms)
        neighbours = []
        for trial in ranked:   # the best's untried neighbours, else the next best's
            neighbours = [c for c in state.space.neighbours(trial.config) if state.usable(c)]
            if neighbours:
                break
        if not neighbours:
            neighbours = [c for c in state.space.sample(batch, rng) if state.usable(c)]
        if not neighbours:
            return
        yield neighbours[:batch]


def search(handle, problem, solver, buffers, scratch, budget=None, strategy="auto", seed=0):
    """Search ``solver``'s configs for ``problem``; stores every trial in the perf-db and returns
    the Outcome.  ``buffers`` are the tensors (inputs filled), ``scratch`` at least the solver's
    workspace.  Raises ConvsolveError when even the default config fails or is wrong."""
    if strategy not in STRATEGIES:
        raise ValidationError("strategy", strategy, f"expected one of {', '.join(STRATEGIES)}")
    budget = budget or Budget.from_env()
    state = _Search(handle, problem, solver, buffers,
                    scratch if workspace_of(solver, problem, handle) else None, budget)
    default = default_config_of(solver, problem, handle)
    winners = PerfDb().winners(handle.db_key, solver.name)
    if strategy == "auto":
        small = budget.configs is None or state.space.size() <= budget.configs
        strategy = "exhaustive" if small else "random-local"
    batches = (_exhaustive(state) if strategy == "exhaustive"
               else _random_local(state, random.Random(seed)))
    default_trial = _check_default(state, default)   # alone: its shared programs get cached
    first = next(batches, [])
    state.build_ahead([*winners, *first])   # one round, where builds go ahead
    state.run(winners)
    for configs in itertools.chain([first], batches):   # [first] makes stopped always set
        stopped = state.exhausted_budget()
        if stopped:
            break
        state.run(configs)
    stopped = stopped or state.exhausted_budget() or "space exhausted"
    state.bar.close()   # (a search that raises leaves its bar to tqdm's __del__)
    trials = list(state.trials.values())
    PerfDb().keep(handle.db_key, problem.key(), solver.name, trials)
    log.info("tuned %r for %s: %d configs, best %s %.4f ms (default %.4f ms); %s", solver.name,
             problem.key(), len(trials), state.best.config, state.best.time_ms,
             default_trial.time_ms, stopped)
    return Outcome(solver.name, default_trial, state.best, trials, stopped)


# {{{ which config a tunable solver builds


def config_for(solver, problem, handle):
    """The config ``solver`` builds for ``problem`` on ``handle``: None for a solver that is not
    tunable; the perf-db's fastest valid config; else ``default_config``'s (ContractError when
    that is invalid)."""
    if not is_tunable(solver):
        return None
    trial = PerfDb().tuned(handle.db_key, problem.key(), solver.name)
    if trial is not None:
        reason = config_refusal(solver, problem, handle, trial.config)
        if reason is None:
            return trial.config
        log.warning("perf-db config %s of %r for %s no longer valid (%s); using the default",
                    trial.config, solver.name, problem.key(), reason)
    return default_config_of(solver, problem, handle)


def tuning_groups(problem, candidates):
    """{problem to tune on: [solvers]} for find's ``candidates``: an epilogue candidate's solver
    on ``problem`` (tuning takes the bare problem), a composite's or rank candidate's solver on
    the problem it runs (``inner_problem``), any other on ``problem``."""
    groups = {}
    for candidate in (getattr(c, "solver", c) for c in candidates):
        inner = getattr(candidate, "inner_problem", None)
        solver, tuned = (candidate.inner, inner(problem)) if inner else (candidate, problem)
        groups.setdefault(tuned, {})[solver.name] = solver
    return {tuned: list(solvers.values()) for tuned, solvers in groups.items()}


def builds_now(handle, problem, solvers):
    """(solver name, problem key, config it builds now) of each solver whose config is known:
    what find hands build_ahead (read only where builds go ahead)."""
    for solver in solvers:
        try:
            yield solver.name, problem.key(), config_for(solver, problem, handle)
        except ConvsolveError:
            pass   # its own build reports it


def tuned_invoker(handle, solver, problem):
    """``handle.invoker`` for the config ``solver`` builds now (config_for)."""
    return handle.invoker(solver, problem, config_for(solver, problem, handle))

# }}}
