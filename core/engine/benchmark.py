"""benchmark: build find's candidates and time them on the caller's buffers.

The scratch buffer find allocates (``scratch_for``), the builds in parallel threads, each
candidate timed (device/timing.py) and its output checked, then the confirmation round
(CONFIRM_TOP); under CONVSOLVE_FIND_ISOLATION=process the builds and timings happen in the
device's worker process (worker.py).  Records nothing: find and explain decide what to keep.
"""
import logging
import os
from dataclasses import replace

import pyopencl as cl

from .. import env
from ..device.timing import RunTimeout, batch_runs, held, time_batch, time_invoker
from ..errors import ContractError, FindError, ValidationError
from ..solvers.calls import workspace_of, wti_of
from ..solvers.registry import solver_attribute
from ..text import format_bytes
from . import fusion, worker
from .parallel import Overdue, build_ahead, call_all
from .search import builds_now, config_for, tuned_invoker
from .solutions import Solution

log = logging.getLogger("convsolve")


#: A candidate whose first timed run is this many times slower than the best so far is sampled
#: no further.
CUTOFF_FACTOR = 10.0
#: After every candidate is timed, the CONFIRM_TOP fastest within CONFIRM_FACTOR of the best
#: are timed once more (one batch of back-to-back runs: a sample), in reverse order, and keep the
#: smaller of their two times: a host busy elsewhere for a few seconds slows every sample of the
#: candidate timed then, and noise only adds time.  On a shared 2-vCPU Zen 4 (PoCL) one find
#: timed winograd.F4x3 at 1.69 ms on ResNet-50's 56x56 3x3 layer at batch 1 and picked
#: implicit_gemm.Fwd (1.31 ms), where five later runs measured 0.99-1.08 and 1.29-2.51 ms; with
#: the round, three finds of ResNet-50's 23 layers agreed on 18 winners, against 14 without
#: (BENCHMARKS.md, "Session 66").
CONFIRM_TOP = 3
CONFIRM_FACTOR = 2.0


class QueueBlocked(FindError):
    """A candidate's kernels did not finish in time, in process: nothing else can run now."""

    def __init__(self, message, timed):
        super().__init__(message)
        self.timed = timed   # the Solutions measured before it


def scratch_for(handle, scratch, needs, allocate=True):
    """(scratch buffer, bytes available, how they were chosen): the caller's (checked) buffer,
    or find's own.

    With ``scratch=None`` find allocates the largest need that fits under
    CONVSOLVE_WORKSPACE_LIMIT and the device's largest allocation, halving on allocation failure
    while the halved size still serves some candidate; ``allocate=False`` only says how much it
    would allow (the worker process allocates its own).
    """
    if scratch is not None:
        return scratch, scratch.size, "given"
    cap = min(env.size_in_bytes(env.WORKSPACE_LIMIT), handle.device.max_mem_alloc_size)
    how = (f"allocated (find allocates at most {format_bytes(cap)}: "
           f"{env.WORKSPACE_LIMIT.name} and the device's largest buffer)")
    if not allocate:
        return None, cap, how
    fitting = [n for n in needs if 0 < n <= cap]
    size, smallest = max(fitting, default=0), min(fitting, default=0)
    while size > 0 and size >= smallest:
        try:
            return cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, size), size, how
        except cl.Error as exc:
            log.info("workspace of %s not allocated (%s); trying half", format_bytes(size), exc)
            size //= 2
    return None, 0, how


def _build_all(handle, problem, solvers, skipped, weights=None):
    """{solver: invoker} for the solvers that build, in parallel threads, each within
    CONVSOLVE_FIND_BUILD_TIMEOUT_S; failures go to skipped.  Given the constant ``weights``
    buffer, a solver with a packing (build_packing) is timed from weights packed once now."""
    level = env.integer(env.COMPILE_PARALLEL_LEVEL, minimum=1) or os.cpu_count() or 1
    limit_s = env.positive_number(env.FIND_BUILD_TIMEOUT_S)
    build_ahead(builds_now(handle, problem, solvers))

    def build(solver):
        invoker = tuned_invoker(handle, solver, problem)
        packing = None if weights is None else handle.weights_cache.packing(
            solver, problem, handle, config_for(solver, problem, handle))
        return invoker if packing is None else handle.weights_cache.timing_invoker(packing,
                                                                                   weights)
    outcome = call_all(build, solvers, level, limit_s)
    built = {}
    for solver in solvers:   # in the given (WTI) order
        invoker, error = outcome[solver]
        if error is None:
            built[solver] = invoker
            continue
        if isinstance(error, Overdue):
            handle.mark_hung(solver, problem, error)
        skipped[solver.name] = f"failed to build: {getattr(error, 'reason', error)}"
        log.info("skip %r: %s", solver.name, skipped[solver.name])
    return built


def benchmark(handle, problem, solvers, buffers, scratch, skipped, failed=None, verify=None,
              best_ms=None, constant_weights=False):
    """Build and time ``solvers`` (the fastest timed again: CONFIRM_TOP); returns their
    Solutions, fastest first, and fills ``skipped``.

    ``failed`` (a dict, if given) also receives the solvers that failed to build or run or wrote
    a wrong output: the skips that belong to the solver, not to this call.  ``verify`` (None:
    CONVSOLVE_FIND_VERIFY) compares each output with sampled reference values; without it,
    only a non-finite output from finite inputs counts as wrong.  Records nothing: find and
    explain decide what to do with the results.  ``best_ms``, a time already measured for
    the problem, sets the first cut-off.  With ``constant_weights``, solvers that pack their
    weights are timed from weights packed once (the cost of an inference call).  Under
    CONVSOLVE_FIND_ISOLATION=process the candidates are built and timed in the device's worker
    process instead (worker.py), each as a call that packs its weights.
    """
    failed = {} if failed is None else failed
    isolated = _isolation() == "process"
    fitting, needs, scratch, available = _fitting(handle, problem, solvers, scratch, skipped,
                                                  failed, allocate=not isolated)
    verify = env.flag(env.FIND_VERIFY) if verify is None else verify
    if isolated:
        values, by_name = worker.epilogue_scalars(problem, buffers), {s.name: s for s in fitting}

        def again(result):   # a failure here leaves the first time standing, recorded nowhere
            timed = worker.benchmark(handle, problem, [by_name[result.solver]], available, {},
                                     {}, verify, values)
            return timed[0].time_ms if timed else None
        return _confirmed(worker.benchmark(handle, problem, fitting, available, skipped, failed,
                                           verify, values), again)
    built = _build_all(handle, problem, fitting, skipped,
                       buffers.w if constant_weights else None)
    failed.update({s.name: skipped[s.name] for s in fitting if s not in built})
    if env.flag(env.DEBUG_COMPILE_ONLY):
        log.info("compile only: built %d solvers for %s, timed none", len(built), problem.key())
        return []
    return _time_all(handle, problem, built, needs, buffers, scratch, skipped, failed, verify,
                     best_ms)


def _fitting(handle, problem, solvers, scratch, skipped, failed, allocate):
    """(the solvers whose WTI and workspace answer and whose workspace fits, highest WTI first;
    {solver: workspace bytes}; the scratch buffer; the bytes it offers): benchmark's first step.
    A broken answer is a failure, a workspace too large a skip."""
    needs, wtis = {}, {}
    for solver in solvers:
        try:
            wtis[solver] = wti_of(solver, problem)
            needs[solver] = workspace_of(solver, problem, handle)
        except ContractError as exc:
            skipped[solver.name] = failed[solver.name] = exc.reason
            log.info("skip %r: %s", solver.name, exc.reason)
    scratch, available, how = scratch_for(handle, scratch, needs.values(), allocate=allocate)
    fitting = []
    for solver, need in needs.items():
        if need > available:
            skipped[solver.name] = (f"needs {format_bytes(need)} workspace, "
                                    f"{format_bytes(available)} {how}")
            log.info("skip %r: %s", solver.name, skipped[solver.name])
        else:
            fitting.append(solver)
    fitting.sort(key=lambda s: -wtis[s])
    return fitting, needs, scratch, available


def _time_all(handle, problem, built, needs, buffers, scratch, skipped, failed, verify, best_ms):
    """The built candidates timed in order, each output checked, then the confirmation round
    (benchmark's last step): their Solutions, fastest first.  A run past
    CONVSOLVE_FIND_RUN_TIMEOUT_S raises QueueBlocked."""
    budget = env.positive_number(env.FIND_SOLVER_BUDGET_MS)
    limit_s = env.positive_number(env.FIND_RUN_TIMEOUT_S)
    check = fusion.output_check(handle, problem, buffers, verify)
    by_name = {solver.name: solver for solver in built}
    results = []

    def timed(solver, cutoff_ms, sample_of=None):
        """``solver``'s time, or with ``sample_of`` (ms) one sample of a run that took that
        long; a run past the limit ends find (QueueBlocked)."""
        given = scratch if needs[solver] else None
        try:
            if sample_of is None:
                return time_invoker(built[solver], buffers, given, budget, cutoff_ms, limit_s)
            with held():
                return time_batch(built[solver], buffers, given, batch_runs(sample_of), limit_s)
        except RunTimeout as exc:
            failed[solver.name] = f"failed to run: {exc}"
            raise QueueBlocked(f"{solver.name!r} on {problem.key()}: {exc}; the device queue of "
                               f"{handle.name} stays blocked: restart the process, and set "
                               f"{env.FIND_ISOLATION.name}=process to contain such solvers",
                               sorted(results, key=lambda s: s.time_ms)) from exc

    for solver, invoker in built.items():
        best = min([r.time_ms for r in results] + ([best_ms] if best_ms else []), default=None)
        given = scratch if needs[solver] else None
        try:
            time_ms = timed(solver, None if best is None else best * CUTOFF_FACTOR)
            fault = check.fault(solver_attribute(solver, "tolerance"), *(
                [lambda run=invoker, given=given: run(buffers, given)]
                if problem.epilogue is not None else []))
        except QueueBlocked:
            raise
        except Exception as exc:  # noqa: BLE001
            handle.forget_invoker(solver, problem)
            fault = f"failed to run: {getattr(exc, 'reason', exc)}"
        if fault:
            skipped[solver.name] = failed[solver.name] = fault
            log.info("skip %r: %s", solver.name, fault)
            continue
        log.info("timed %r: %.4f ms", solver.name, time_ms)
        results.append(Solution(solver.name, solver.family, time_ms, needs[solver], "benchmark"))

    def again(result):
        try:
            return timed(by_name[result.solver], None, sample_of=result.time_ms)
        except QueueBlocked:
            raise
        except Exception as exc:  # noqa: BLE001 (it ran before: its first time stands)
            log.info("confirming %r: %s", result.solver, getattr(exc, "reason", exc))
            return None
    return _confirmed(sorted(results, key=lambda s: s.time_ms), again)


def _confirmed(results, time_again):
    """``results`` (Solutions, fastest first) after the confirmation round (CONFIRM_TOP):
    ``time_again(solution)`` times a contender once more (None: it could not, its time stands)."""
    contenders = [r for r in results[:CONFIRM_TOP]
                  if r.time_ms <= results[0].time_ms * CONFIRM_FACTOR]
    if len(contenders) < 2:
        return results
    for result in reversed(contenders):
        again = time_again(result)
        if again is not None:
            log.info("timed %r again: %.4f ms", result.solver, again)
            results[results.index(result)] = replace(result, time_ms=min(result.time_ms, again))
    return sorted(results, key=lambda s: s.time_ms)


def _isolation():
    value = env.FIND_ISOLATION.raw().lower()
    if value not in ("none", "process"):
        raise ValidationError(env.FIND_ISOLATION.name, value, "expected none or process")
    return value
