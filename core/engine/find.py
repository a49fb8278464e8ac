"""find: benchmark the applicable solvers of a problem, rank them and record them in the find-db."""
import enum
import functools
import logging
from dataclasses import dataclass, field

import pyopencl as cl

from .. import env
from ..db.find_db import FindDb, Record
from ..db.perf_db import PerfDb
from ..device.handle import Handle
from ..device.tensors import DeviceTensor
from ..device.timing import time_invoker
from ..device.weights_cache import check_keywords, db_key
from ..epilogue import Activation
from ..errors import ContractError, ConvsolveError, FindError, ValidationError
from ..heuristics import ranking
from ..problem import Problem
from ..solvers.calls import is_tunable, workspace_of
from ..solvers.policy import Policy
from . import fusion
from .benchmark import QueueBlocked, benchmark, scratch_for
from .run import check_buffers, check_device_limits, check_handle, check_scratch
from .search import Budget, search, tuned_invoker, tuning_groups
from .solutions import PREDICTED, Solution, predicted_ranking, usable_records

log = logging.getLogger("convsolve")


class FindMode(enum.Enum):
    """What find does on a find-db hit or miss; values are MIOpen's numbers."""

    NORMAL = 1           # always benchmark every applicable solver
    FAST = 2             # db hit, else the WTI fallback ranking (nothing is run)
    HYBRID = 3           # db hit, else benchmark every applicable solver
    DYNAMIC_HYBRID = 5   # db hit, else benchmark the dynamic solvers only
    TRUST_VERIFY = 6     # db hit re-timed; slower than recorded: benchmark and tune again
    TRUST_VERIFY_FULL = 7   # the same, with an unbounded tuning budget

    @classmethod
    def parse(cls, value=None):
        """A FindMode from itself, a name or a number; None reads CONVSOLVE_FIND_MODE."""
        return _parse_enum(cls, value, env.FIND_MODE, "find mode")


class FindEnforce(enum.Enum):
    """CONVSOLVE_FIND_ENFORCE: what find forces besides its mode; values are MIOpen's numbers."""

    NONE = 1
    DB_UPDATE = 2          # benchmark again on a find-db hit
    SEARCH = 3             # tune tunable solvers that have no perf-db entry (exhaustive=True)
    SEARCH_DB_UPDATE = 4   # tune them even where they have one
    DB_CLEAN = 5           # delete the problem's user find-db and perf-db records first

    @classmethod
    def parse(cls, value=None):
        """A FindEnforce from itself, a name or a number; None reads CONVSOLVE_FIND_ENFORCE."""
        return _parse_enum(cls, value, env.FIND_ENFORCE, env.FIND_ENFORCE.name)


def _parse_enum(cls, value, var, field):
    if isinstance(value, cls):
        return value
    text = str(var.raw() if value is None else value).strip().upper()
    member = _members(cls).get(text)
    if member is None:
        raise ValidationError(field, value if value is not None else text,
                              "expected " + ", ".join(f"{m.name} ({m.value})" for m in cls))
    return member


@functools.cache
def _members(cls):
    """{name or number as text: member} of an enum of find's."""
    return {text: m for m in cls for text in (m.name, str(m.value))}


def _dynamic_only(problem, solvers, skipped):
    """The dynamic solvers among ``solvers`` (all of them when none is dynamic)."""
    dynamic = [s for s in solvers if s.dynamic]
    if not dynamic:
        log.info("find %s: no dynamic solver applies; benchmarking all", problem.key())
        return solvers
    for solver in solvers:
        if not solver.dynamic:
            skipped[solver.name] = "not dynamic (DYNAMIC_HYBRID benchmarks dynamic solvers only)"
    return dynamic


def find(handle: Handle, problem: Problem, *, x: DeviceTensor | None, w: DeviceTensor,
         y: DeviceTensor | None, scratch: cl.Buffer | None = None,
         request_count: int | None = None, exhaustive: bool = False,
         mode: FindMode | str | int | None = None, verify: bool | None = None,
         max_tolerance: float | None = None, deterministic: bool | None = None,
         scale: DeviceTensor | None = None, bias: DeviceTensor | None = None,
         z: DeviceTensor | None = None, alpha: float = 1.0, beta: float = 0.0,
         z_scale: float = 1.0, activation: Activation | str | None = None,
         limit: int | str | None = None, constant_weights: bool = False) -> list[Solution]:
    """Rank the solvers of ``problem``, fastest first, benchmarking as the find mode says.

    Buffers (pyopencl Buffers, or pyopencl Arrays: float32, the tensor's shape, C-contiguous,
    of the handle's context) are in forward-sense roles for every direction (backward-data
    writes ``x``, backward-weights writes ``w``); find runs candidates on them, so the written buffer holds
    some candidate's result afterwards (not under CONVSOLVE_FIND_ISOLATION=process, where a
    worker process times them on tensors of its own).  ``scratch`` is a buffer, or None to let
    find allocate what candidates need (up to CONVSOLVE_WORKSPACE_LIMIT).  A find-db hit that
    lacks some candidate (a solver installed since) benchmarks just the missing ones and merges
    them.  Tunable solvers build the perf-db's config for the problem, else their device
    default.  ``exhaustive=True`` ignores the find-db, first searches the configs of every
    applicable tunable solver without a perf-db entry (within the CONVSOLVE_TUNING_* budget;
    search.py), then benchmarks every applicable solver (CONVSOLVE_FIND_ENFORCE can force the
    same).  ``mode`` overrides CONVSOLVE_FIND_MODE.  ``verify=True`` (None:
    CONVSOLVE_FIND_VERIFY) compares every candidate's output with sampled float64 reference
    values; a wrong solver is skipped and recorded as failed, never as a solution.  A candidate
    that writes NaN or inf from finite inputs is skipped that way too, verified or not.
    ``max_tolerance`` and ``deterministic`` (None: CONVSOLVE_MAX_TOLERANCE,
    CONVSOLVE_DETERMINISTIC) leave out the solvers whose declared numerics they exclude
    (policy.py); a policy that is set keys its own find-db records.

    A problem with an epilogue (Problem.with_epilogue) takes its values here: ``scale``,
    ``bias`` (buffers of K floats), ``z`` (a buffer of y's size, which may be ``y`` itself),
    ``alpha``, ``beta``, ``z_scale`` and ``activation`` (a name or a convsolve.Activation with
    its parameters), each only where the epilogue has that part (docs/epilogues.md).  Every
    solver is a candidate: fused as far as its ``fused_stages`` says, and unfused
    (``<name>/unfused``: the bare convolution, then the core's pass), the faster winning.
    When candidates read y's prior contents (beta, or z being y), find runs them on a copy, so
    y keeps what it held.

    ``limit`` (None: CONVSOLVE_FIND_LIMIT; unset, every candidate) makes a find-db miss a
    budgeted find: only the learned ranking's top ``limit`` candidates are benchmarked, or with
    ``"auto"`` its top 1 to 3 by its confidence; the rest follow the timed ones with their
    predicted times (``source == 'predicted'``), and the find-db records them as predicted,
    not timed (docs/heuristics.md).  Where no model applies, every candidate is benchmarked.

    ``constant_weights=True`` ranks for callers whose weights stay constant (inference: run and
    plans with the same keyword): a solver that packs or transforms its weights
    (build_packing) is timed without that work (packed once before timing), and the ranking
    is kept under its own find-db key (the policy's, then ``-cw``), beside the ordinary one.

    :returns: a list of :class:`Solution`, at most ``request_count`` long; empty for a zero batch
      and under CONVSOLVE_DEBUG_COMPILE_ONLY=1.
    :raises FindError: when no solver works, listing why each was skipped.
    """
    limit = _parse_limit(limit)
    buffers, mode, enforce, policy = _check_call(
        handle, problem, request_count, x, w, y, scratch, mode, max_tolerance, deterministic,
        {"scale": scale, "bias": bias, "z": z, "alpha": alpha, "beta": beta, "z_scale": z_scale,
         "activation": activation})
    check_keywords(problem, constant_weights, 0)
    if problem.n == 0:
        log.info("find %s: zero batch, nothing to compute", problem.key())
        return []
    state = _State.start(handle, problem, mode, enforce, policy, exhaustive, scratch,
                         constant_weights)
    answer = _answer_from_db(handle, problem, mode, state, buffers, scratch, policy)
    if answer is not None:
        return answer[:request_count]
    predicted = _budget(handle, problem, state, limit) if limit and not state.tune else []
    with handle.timing_section() as timing:   # a profiling queue, ordered with the caller's
        timed = _measure(timing, problem, state, fusion.bench_buffers(timing, problem, buffers),
                         scratch, verify, constant_weights)
    if env.flag(env.DEBUG_COMPILE_ONLY):
        return []
    results = sorted(state.known + timed, key=lambda s: s.time_ms) + predicted
    if not results:
        reasons = "; ".join(f"{name}: {why}" for name, why in sorted(state.skipped.items()))
        raise FindError(f"no solver works for {problem.key()} on {handle.name}: "
                        f"{reasons or 'no solver is installed'}")
    _record(state, handle, timed)
    handle.remember_ranking(state.key, results)
    return results[:request_count]


# {{{ find's steps: check the call, consult the find-db, measure, record

def _parse_limit(limit):
    """find's limit: None (every candidate), a positive int or 'auto'."""
    text = str(env.FIND_LIMIT.raw() if limit is None else limit).strip().lower()
    if text in ("", "none"):
        return None
    if text == "auto" or (text.isdigit() and int(text) > 0):
        return text if text == "auto" else int(text)
    raise ValidationError("limit" if limit is not None else env.FIND_LIMIT.name,
                          limit if limit is not None else text,
                          "expected a positive integer, 'auto' or None")


def _budget(handle, problem, state, limit):
    """Budgeted find: keep the ranking's top candidates in state.solvers; the rest as
    predicted Solutions (recorded as not timed)."""
    ranked = predicted_ranking(handle, state.solvers, problem)
    if not ranked or ranked[0].source != "predicted":
        return []
    if limit == "auto":
        limit = ranking.model_for(handle.device)[0].auto_count(
            {s.solver: s.time_ms for s in ranked})
    names = {s.solver for s in ranked[:limit]}
    kept = [s for s in state.solvers if s.name in names]
    if not kept:
        return []
    state.predicted = ranked[limit:]
    log.info("find %s: budgeted (limit %s): timing %s", problem.key(), limit, sorted(names))
    state.skipped.update({s.solver: PREDICTED for s in state.predicted})
    state.skipped.update({s.name: "not timed (budgeted find): neither the model nor a WTI "
                          "ranks it" for s in state.solvers
                          if s.name not in names and s.name not in state.skipped})
    state.solvers = kept
    return state.predicted

def _check_call(handle, problem, request_count, x, w, y, scratch, mode, max_tolerance,
                deterministic, epilogue):
    """find's arguments checked: (buffers with their epilogue values, mode, enforce, policy)."""
    if request_count is not None and (isinstance(request_count, bool)
                                      or not isinstance(request_count, int) or request_count < 1):
        raise ValidationError("request_count", request_count, "must be a positive integer or None")
    check_handle(handle)
    buffers = check_buffers(problem, x, w, y, handle)
    buffers = buffers.with_epilogue_args(fusion.epilogue_args(problem, buffers, handle, **epilogue))
    check_device_limits(handle, problem)
    if scratch is not None:
        check_scratch(scratch, 0, "find", handle)
    return buffers, FindMode.parse(mode), FindEnforce.parse(), Policy.resolve(max_tolerance,
                                                                              deterministic)


@dataclass
class _State:
    """One find's candidates and what the find-db holds for them, as its steps change them."""

    db: FindDb
    key: str              # the find-db key: the problem's, with the policy's suffix
    applicable: list      # every candidate
    solvers: list         # the candidates still to benchmark
    skipped: dict         # solver name -> why it is not a candidate or was not timed
    recorded: list        # the find-db's records of the key, kept unless measured again
    known: list           # the usable records (Solutions) that answer or join the ranking
    consult: bool         # whether the find-db may answer
    tune: bool            # whether tunable candidates are searched first
    retune: bool          # whether configs in the user perf-db are searched again
    budget: Budget | None   # the tuning budget; None: CONVSOLVE_TUNING_*'s, read when tuning
    failed: dict = field(default_factory=dict)   # solver name -> why it failed, to record
    predicted: list = field(default_factory=list)   # Solutions a budgeted find did not time

    @classmethod
    def start(cls, handle, problem, mode, enforce, policy, exhaustive, scratch,
              constant_weights=False):
        db, key = FindDb(), db_key(policy.db_key(problem), constant_weights)
        if enforce is FindEnforce.DB_CLEAN:
            db.keep(handle.db_key, key, [])
            PerfDb().forget(handle.db_key, problem.key())
        tune = exhaustive or enforce in (FindEnforce.SEARCH, FindEnforce.SEARCH_DB_UPDATE)
        applicable, skipped = fusion.candidates(problem, policy, handle.device.name)
        solvers = applicable
        if mode is FindMode.DYNAMIC_HYBRID and not tune:
            solvers = _dynamic_only(problem, applicable, skipped)
        recorded = db.records(handle.db_key, key)
        consult = mode is not FindMode.NORMAL and not tune and enforce is not FindEnforce.DB_UPDATE
        known = usable_records(recorded, applicable, skipped) if consult else []
        if scratch is not None:   # a caller's buffer bounds db answers as it bounds benchmarks
            known = [s for s in known if s.workspace <= scratch.size]
        return cls(db, key, applicable, solvers, skipped, recorded, known, consult, tune,
                   enforce is FindEnforce.SEARCH_DB_UPDATE, None)


def _answer_from_db(handle, problem, mode, state, buffers, scratch, policy):
    """The find-db's answer (a hit, or FAST mode's WTI fallback), or None to measure; a hit the
    TRUST_VERIFY modes no longer trust turns the find into a search of every candidate."""
    if not (state.known or (state.consult and mode is FindMode.FAST)):
        return None
    answer, state.solvers = _consult_db(handle, problem, mode, state.known, state.recorded,
                                        state.applicable, state.solvers)
    if answer is state.known and not _trusted(handle, problem, mode, state.known[0], buffers,
                                              scratch, policy):
        answer, state.solvers, state.tune, state.retune = None, state.applicable, True, True
        state.budget = Budget.from_env(unbounded=mode is FindMode.TRUST_VERIFY_FULL)
        state.known = []
    if answer is None:
        return None
    if answer is state.known:
        handle.remember_ranking(state.key, state.known)
    if scratch is not None:   # the WTI fallback knows no scratch either
        answer = [s for s in answer if s.workspace <= scratch.size]
    return answer


def _measure(handle, problem, state, buffers, scratch, verify, constant_weights=False):
    """The candidates left to benchmark, timed (their configs searched first when the find
    tunes); a queue that blocks records what was measured before find raises."""
    if state.tune and not env.flag(env.DEBUG_COMPILE_ONLY):   # an epilogue's: the bare problem's
        for tuned, solvers in tuning_groups(problem, state.solvers).items():
            tune_solvers(handle, tuned, solvers, buffers, scratch,
                         state.budget or Budget.from_env(), state.retune)
    try:
        return benchmark(handle, problem, state.solvers, buffers, scratch, state.skipped,
                         state.failed, verify, constant_weights=constant_weights)
    except QueueBlocked as exc:   # keep what was measured, and the hung solver as failed
        _record(state, handle, exc.timed)
        raise


def _trusted(handle, problem, mode, winner, buffers, scratch, policy=None):
    """Whether a find-db hit stands: always, except in the TRUST_VERIFY modes, where the
    recorded winner is timed again and must be within CONVSOLVE_TRUST_VERIFY_SLOWDOWN of its
    record."""
    if mode not in (FindMode.TRUST_VERIFY, FindMode.TRUST_VERIFY_FULL):
        return True
    try:
        solver = fusion.resolve(problem, winner.solver, policy)
        with handle.timing_section() as timing:
            scratch, _, _ = scratch_for(timing, scratch, [winner.workspace])
            time_ms = time_invoker(tuned_invoker(timing, solver, problem),
                                   fusion.bench_buffers(timing, problem, buffers),
                                   scratch if winner.workspace else None,
                                   env.positive_number(env.FIND_SOLVER_BUDGET_MS), None,
                                   env.positive_number(env.FIND_RUN_TIMEOUT_S))
    except ConvsolveError as exc:
        log.info("find %s: recorded winner %r fails now (%s): searching again", problem.key(),
                 winner.solver, exc)
        return False
    slowdown = env.positive_number(env.TRUST_VERIFY_SLOWDOWN)
    if time_ms <= winner.time_ms * slowdown:
        log.info("find %s: recorded winner %r re-timed %.4f ms (recorded %.4f): trusted",
                 problem.key(), winner.solver, time_ms, winner.time_ms)
        return True
    log.info("find %s: recorded winner %r re-timed %.4f ms, over %g x its record %.4f: "
             "searching again", problem.key(), winner.solver, time_ms, slowdown, winner.time_ms)
    return False


def tune_solvers(handle, problem, solvers, buffers, scratch, budget, retune, strategy="auto"):
    """Search the configs of the tunable ``solvers`` (those without a user perf-db entry unless
    ``retune``) and return their search.Outcomes; a search that fails is logged, and
    benchmark() then meets the solver's default.  A problem with an epilogue tunes its bare
    convolution (a config changes speed only; fused builds take the bare problem's)."""
    problem, buffers, perf_db = problem.with_epilogue(None), buffers.with_epilogue_args(None), PerfDb()

    def tuned_here(solver):   # the user perf-db has a config for it (a system one does not count)
        trial = perf_db.tuned(handle.db_key, problem.key(), solver.name)
        return trial is not None and trial.source == "user"
    tunable = [s for s in solvers if is_tunable(s) and (retune or not tuned_here(s))]
    needs = {}
    for solver in tunable:
        try:
            needs[solver] = workspace_of(solver, problem, handle)
        except ContractError as exc:
            log.info("not tuning %r: %s", solver.name, exc.reason)
    scratch, available, _ = scratch_for(handle, scratch, needs.values())
    outcomes = []
    for solver, need in needs.items():
        if need > available:
            continue
        try:
            outcomes.append(search(handle, problem, solver, buffers, scratch, budget, strategy))
        except ConvsolveError as exc:
            log.warning("tuning %r for %s failed: %s", solver.name, problem.key(), exc)
    return outcomes


def _consult_db(handle, problem, mode, known, recorded, applicable, solvers):
    """What the find-db settles: (the answer, or None to benchmark; the solvers to benchmark).

    A hit answers when every candidate was tried before (or in FAST mode); a hit that lacks
    candidates (installed since) leaves just those to benchmark; FAST mode answers a miss with
    the learned ranking (else the WTI fallback).
    """
    tried = {record.solver for record in recorded}
    untried = [solver for solver in solvers if solver.name not in tried]
    if known and (mode is FindMode.FAST or not untried):
        log.info("find %s: find-db hit (%d solutions)", problem.key(), len(known))
        return known, []
    if mode is FindMode.FAST:
        fallback = predicted_ranking(handle, applicable, problem)
        if not fallback:
            raise FindError(f"FAST find for {problem.key()}: find-db miss and no applicable "
                            "solver has a known WTI")
        log.info("find %s: find-db miss, %s ranking (FAST mode)", problem.key(),
                 fallback[0].source)
        return fallback, []
    log.info("find %s: find-db hit without %s (installed since?): benchmarking them",
             problem.key(), ", ".join(s.name for s in untried))
    return None, untried


def _record(state, handle, timed):
    """Store this find's measurements and failures in the user find-db with every earlier
    record of a solver it did not measure (disabled, not fitting the scratch, recorded before);
    a db that cannot be written only warns."""
    families = {solver.name: solver.family for solver in state.solvers}
    measured = {s.solver for s in timed} | set(state.failed)
    records = [Record(s.solver, s.family, s.time_ms, s.workspace) for s in timed]
    records += [Record(name, families[name], None, 0, failure=why)
                for name, why in state.failed.items()]
    records += [Record(s.solver, s.family, None, s.workspace, failure=PREDICTED)
                for s in state.predicted]
    measured |= {s.solver for s in state.predicted}
    records += [Record(r.solver, r.family, r.time_ms, r.workspace, failure=r.failure)
                for r in state.recorded if r.solver not in measured]
    state.db.keep(handle.db_key, state.key, records)

# }}}
