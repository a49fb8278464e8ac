"""Execution plans: a problem's solver resolved, built and checked once, then run at enqueue speed.

A Plan holds what cuDNN's frontend calls an execution plan: the resolved solver, its built
invoker and its workspace size, for one problem on one handle under one numerical policy.
``plan.run`` checks only what can differ between calls (the buffers: type, size, context) and
enqueues.  It notices, by counters and not by re-reading the dbs, when what it resolved may have
changed: a solver switch or another variable it depends on (env.generation), a plugin reload
(registry.generation), a find that re-ranked problems on its handle or a released handle
(Handle.ranking_generation).  Then it resolves again as it was made: a solver name stays that
solver (SolverError when it can no longer run, naming why), a family or None takes what is
best now, and a change of solver is logged.  ``convsolve.run`` is a lookup of the handle's plan
for its arguments, then ``plan.run``.  A plan made with ``constant_weights=True`` runs a
solver's packing (build_packing) from the handle's weights cache (device/weights_cache.py),
keyed by the weights buffer and the ``weights_version`` its calls pass.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Hashable
from typing import NamedTuple

import pyopencl as cl

from .. import env
from ..device.handle import Handle
from ..device.tensors import DeviceTensor
from ..device.weights_cache import Built, check_keywords, db_key
from ..epilogue import Activation
from ..errors import ConvsolveError, NumericsError, SolverError, ValidationError
from ..heuristics import ranking
from ..hookspecs import Buffers, Invoker, Solver
from ..problem import Direction, Problem
from ..solvers.calls import workspace_of
from ..solvers.policy import Policy
from ..solvers.registry import generation
from . import fusion
from .run import (
    check_buffers,
    check_handle,
    check_problem,
    check_scratch,
    check_solver_argument,
    resolve_solver,
)
from .search import config_for, tuned_invoker
from .solutions import Solution, ranked_without_benchmark
from .trials import Trials, record
from .verify import check_numerics

log = logging.getLogger("convsolve")


class _Resolved(NamedTuple):
    """What a plan resolved: the solver, its workspace bytes, its invoker (None for a zero
    batch), the CONVSOLVE_CHECK_NUMERICS level it runs under, the candidates an online
    plan times on its next calls (trials.py; None: none), and with constant weights the
    solver's packing (None: it has none, or the weights are not constant)."""

    solver: Solver
    workspace: int
    invoker: Invoker | None
    numerics: str
    trials: Trials | None = None
    packing: Built | None = None


class Plan:
    """One problem's solver on one handle, resolved and built, ready to run (module docstring).

    ``solver`` is a solver name (``<name>/unfused`` for an epilogue's unfused variant), a family
    (its fastest solver as find ranked it) or None: the fastest of this process's last find of
    the problem, else the find-db's record, else immediate mode's pick (get_solutions).
    ``max_tolerance`` and ``deterministic`` are find's numerical policy.  ``constant_weights``
    says the weights buffer of each call keeps its contents until the call's
    ``weights_version`` changes (forward and backward-data): the plan then takes find's pick
    under constant weights and runs solvers that pack their weights from packed weights kept
    in the handle.  ``ranked``: the ranking ``ranked_without_benchmark`` just gave for the
    problem under this policy (the numpy API's), taken by the first resolution instead of
    ranking again.  Plans are safe to share between threads: calls enqueue one at a time on
    the handle's in-order queue.
    """

    def __init__(self, handle: Handle, problem: Problem, solver: str | None = None, *,
                 max_tolerance: float | None = None, deterministic: bool | None = None,
                 online: bool = False, constant_weights: bool = False,
                 ranked: list[Solution] | None = None) -> None:
        self.handle, self.problem = check_handle(handle), check_problem(problem)
        check_keywords(problem, constant_weights, 0)
        #: Whether calls' weights are constant (packed once per buffer and weights_version).
        self.constant_weights = constant_weights
        self.request = None if solver is None else check_solver_argument(solver)
        self.online = online and solver is None   # time the model's unsure picks (trials.py)
        self._policy = (max_tolerance, deterministic)
        self._bare = problem.epilogue is None
        Policy.resolve(max_tolerance, deterministic)   # a bad argument is refused now
        self._lock = threading.Lock()
        self._state: tuple[Hashable, _Resolved] | None = None
        self._ranked = ranked   # a ranking the caller just made: the first resolution's
        self._current()

    @property
    def solver(self) -> str:
        """The name of the solver the plan runs now."""
        return self._current().solver.name

    @property
    def workspace(self) -> int:
        """Bytes of scratch the plan's solver needs."""
        return self._current().workspace

    def _stamp(self) -> tuple[int, int, int]:
        return env.generation(), generation(), self.handle.ranking_generation

    def _current(self) -> _Resolved:
        """The resolution, made again when a counter moved since it was made."""
        stamp, state = self._stamp(), self._state
        if state is not None and state[0] == stamp:
            return state[1]
        with self._lock:
            state = self._state
            if state is None or state[0] != stamp:
                resolved = self._resolve()
                if state is not None and state[1].solver.name != resolved.solver.name:
                    log.info("plan %s: now %r (was %r)", self.problem.key(),
                             resolved.solver.name, state[1].solver.name)
                state = self._state = (stamp, resolved)
            return state[1]

    def _resolve(self) -> _Resolved:
        handle, problem = self.handle, self.problem
        policy = Policy.resolve(*self._policy)
        numerics = env.CHECK_NUMERICS.raw()
        if numerics not in ("0", "1", "2"):
            raise ValidationError(env.CHECK_NUMERICS.name, numerics, "expected 0, 1 or 2")
        chosen = None if self.request is None else resolve_solver(handle, problem,
                                                                  self.request, policy)
        best = None
        if chosen is None:   # find's pick; with constant weights, a find told so first
            keys = [policy.db_key(problem)]
            if self.constant_weights:
                keys.insert(0, db_key(keys[0], True))
            best = next((name for name in map(handle.best_solver, keys) if name), None)
        if best is not None:
            try:
                chosen = resolve_solver(handle, problem, best, policy)
            except SolverError as exc:   # turned off since find ranked it: the next best
                log.info("plan %s: find's pick cannot run now (%s)", problem.key(), exc)
        trials = None
        if chosen is None:
            ranked = self._ranked or ranked_without_benchmark(handle, problem, policy)
            if not ranked:
                raise SolverError(f"no solver can run {problem.key()} on {handle.name} "
                                  "(convsolve.applicable_solvers lists none, or none ranks)")
            chosen = resolve_solver(handle, problem, ranked[0].solver, policy)
            if self.online and problem.n and ranked[0].source == "predicted" and not (
                    problem.epilogue and problem.epilogue.blend):   # a retry would reread y
                trials = self._trials(ranked, policy)
        invoker = tuned_invoker(handle, chosen, problem) if problem.n else None
        packing = None
        if self.constant_weights and invoker is not None:
            packing = handle.weights_cache.packing(chosen, problem, handle,
                                                   config_for(chosen, problem, handle))
        self._ranked = None   # a later resolution ranks afresh
        log.info("plan %s: %r%s", problem.key(), chosen.name,
                 " from packed weights" if packing else "")
        return _Resolved(chosen, workspace_of(chosen, problem, handle), invoker, numerics, trials,
                         packing)

    def _trials(self, ranked: list[Solution], policy: Policy) -> Trials | None:
        """Trials of the model's unsure top picks (its auto budget: 2 or 3), each built at its
        first trial call; None when the model is sure of one."""
        model = ranking.model_for(self.handle.device)
        count = model[0].auto_count({s.solver: s.time_ms for s in ranked}) if model else 1
        candidates = {s.solver: resolve_solver(self.handle, self.problem, s.solver, policy)
                      for s in (ranked[:count] if count > 1 else ())}
        return Trials(candidates, ranked) if len(candidates) > 1 else None

    def run(self, *, x: DeviceTensor | None, w: DeviceTensor, y: DeviceTensor | None,
            scratch: cl.Buffer | None = None, scale: DeviceTensor | None = None,
            bias: DeviceTensor | None = None, z: DeviceTensor | None = None,
            alpha: float = 1.0, beta: float = 0.0, z_scale: float = 1.0,
            activation: Activation | str | None = None,
            weights_version: int = 0) -> list[cl.Event]:
        """Enqueue the plan's solver on these buffers (forward-sense roles, as find and run
        take them) and return its events; nothing waits.  ``scratch`` as run's; the epilogue's
        values as find's.  With ``constant_weights``, ``weights_version`` (an int) names the
        contents of ``w``: the caller passes another one whenever it has changed them."""
        if weights_version.__class__ is not int or weights_version < 0:   # 0 passes at once
            check_keywords(self.problem, self.constant_weights, weights_version)
        buffers = check_buffers(self.problem, x, w, y, self.handle)
        if not self._bare or scale is not None or bias is not None or z is not None \
                or activation is not None or (alpha, beta, z_scale) != (1.0, 0.0, 1.0):
            buffers = buffers.with_epilogue_args(fusion.epilogue_args(
                self.problem, buffers, self.handle, scale=scale, bias=bias, z=z, alpha=alpha,
                beta=beta, z_scale=z_scale, activation=activation))
        weights = (buffers.w, weights_version) if self.constant_weights else None
        return self.enqueue(buffers, scratch, weights)

    def enqueue(self, buffers: Buffers, scratch: cl.Buffer | None = None,
                weights: tuple[object, int] | None = None) -> list[cl.Event]:
        """run() after its checks: ``buffers`` are checked Buffers carrying their epilogue
        values (the numpy API's own, made for the problem, come here directly); ``weights``,
        with constant weights, is (the object whose contents ``buffers.w`` holds, its
        version): the weights cache's key (None: the weights are not constant)."""
        resolved, handle = self._current(), self.handle
        if resolved.invoker is None:   # a zero batch
            problem = self.problem
            if problem.direction is not Direction.BACKWARD_WEIGHTS:
                return []
            if problem.epilogue is not None:   # alpha * (the sum over an empty batch) + beta * w
                finish = fusion.EpiloguePass(handle, problem)
                return [finish(buffers.w, buffers.w, buffers.epilogue_args._replace(alpha=0.0))]
            return [cl.enqueue_fill_buffer(handle.queue, buffers.w, b"\0\0\0\0", 0,
                                           problem.w.nbytes)]
        if resolved.trials is not None:
            return self._trial(resolved, buffers, scratch)
        return self._call(handle, resolved.solver.name, resolved.workspace, resolved.invoker,
                          resolved.numerics, buffers, scratch,
                          None if weights is None else resolved.packing, weights)

    def _call(self, handle: Handle, name: str, needed: int, invoker: Invoker, numerics: str,
              buffers: Buffers, scratch: cl.Buffer | None, packing: Built | None = None,
              weights: tuple[object, int] | None = None) -> list[cl.Event]:
        """Enqueue ``invoker`` (of solver ``name``, needing ``needed`` bytes of scratch) on
        ``handle``'s queue: the plan's handle, or in a trial its timing twin."""
        if scratch is not None:
            check_scratch(scratch, needed, name, handle)
        elif needed:
            scratch = handle.scratch(needed, name)
        events = None
        if packing is not None and weights is not None:   # None: over the cache's bound
            events = handle.weights_cache.run(packing, *weights, buffers,
                                              scratch if needed else None)
        if events is None:
            events = invoker(buffers, scratch if needed else None)
        if numerics != "0":
            cl.wait_for_events(events)
            check_numerics(handle, self.problem, buffers, name, strict=numerics == "2")
        return events

    def _trial(self, resolved: _Resolved, buffers: Buffers,
               scratch: cl.Buffer | None) -> list[cl.Event]:
        """A call of an online plan: the next candidate's, timed; once all are timed, the
        fastest recorded and the plan resolved again to it (trials.py)."""
        trials = resolved.trials
        timed = trials.results()
        if timed is not None:
            with self._lock:
                if self._state is not None and self._state[1] is resolved:
                    self._state = None   # the winner from the handle's ranking next
                    record(self.handle, Policy.resolve(*self._policy).db_key(self.problem),
                           trials, timed)
            return self.enqueue(buffers, scratch)
        picked = trials.next()
        if picked is None:   # the last calls still run: the plan's own pick meanwhile
            return self._call(self.handle, resolved.solver.name, resolved.workspace,
                              resolved.invoker, resolved.numerics, buffers, scratch)
        name, solver = picked
        try:   # a build that fails, or a caller's scratch too small for it: left out too
            with self.handle.timing_section() as timing:   # timed: on the profiling queue
                events = self._call(timing, name, workspace_of(solver, self.problem, timing),
                                    tuned_invoker(timing, solver, self.problem),
                                    resolved.numerics, buffers, scratch)
        except NumericsError as exc:   # it wrote the output: the caller hears of it
            trials.drop(name, str(exc))
            raise
        except (ConvsolveError, cl.Error) as exc:
            trials.drop(name, str(exc))
            return self._trial(resolved, buffers, scratch)
        trials.ran(name, events)
        return events


def plan(handle: Handle, problem: Problem, solver: str | None = None, *,
         max_tolerance: float | None = None, deterministic: bool | None = None,
         constant_weights: bool = False) -> Plan:
    """The handle's plan for ``problem`` and ``solver`` under the policy and
    ``constant_weights`` (Plan), made on first use and kept in the handle; convsolve.run uses
    the same plans."""
    check_handle(handle)
    key = (solver, check_problem(problem), max_tolerance, deterministic,
           *(("constant weights",) if constant_weights is True else ()))
    return handle.kept_plan(key, lambda: Plan(handle, problem, solver,
                                              max_tolerance=max_tolerance,
                                              deterministic=deterministic,
                                              constant_weights=constant_weights))


def run(handle: Handle, problem: Problem, solver: str, *, x: DeviceTensor | None,
        w: DeviceTensor, y: DeviceTensor | None, scratch: cl.Buffer | None = None,
        max_tolerance: float | None = None, deterministic: bool | None = None,
        scale: DeviceTensor | None = None, bias: DeviceTensor | None = None,
        z: DeviceTensor | None = None, alpha: float = 1.0, beta: float = 0.0,
        z_scale: float = 1.0, activation: Activation | str | None = None,
        constant_weights: bool = False, weights_version: int = 0) -> list[cl.Event]:
    """Enqueue ``solver`` (a name, or a family find has ranked) on ``problem``; returns its events.

    Nothing waits: synchronise with ``handle.queue.finish()`` or the events.  ``x``, ``w``,
    ``y`` (and the epilogue's tensors) are pyopencl Buffers or Arrays (float32, the tensor's
    shape, C-contiguous, of the handle's context; what an Array still has pending on another
    queue is waited for on the handle's, without the host waiting).  ``scratch`` is a
    buffer of at least the solver's workspace bytes, or None to use one the handle keeps.  The
    call runs the handle's Plan for its arguments (convsolve.plan), made on the first call, so
    repeated calls cost little more than the enqueue.  ``max_tolerance`` and ``deterministic``
    are find's numerical policy (policy.py): a family resolves to its best solver that the
    policy admits, and a named solver it leaves out is refused.  A problem with an epilogue
    takes its values as find does (``scale``, ``bias``, ``z``, ``alpha``, ``beta``,
    ``z_scale``, ``activation``); ``solver`` may then name a solver's unfused variant,
    ``<name>/unfused``.  ``constant_weights=True`` promises that ``w`` keeps its contents
    until a call passes another ``weights_version`` (an int): a solver that packs or
    transforms its weights (build_packing) then does it once per buffer and version, into
    the handle's weights cache (CONVSOLVE_WEIGHTS_CACHE_BYTES); forward and backward-data
    only.  Without it nothing is cached.
    """
    check_handle(handle)
    check_solver_argument(solver)
    chosen = plan(handle, problem, solver, max_tolerance=max_tolerance,
                  deterministic=deterministic, constant_weights=constant_weights)
    return chosen.run(x=x, w=w, y=y, scratch=scratch, scale=scale, bias=bias, z=z, alpha=alpha,
                      beta=beta, z_scale=z_scale, activation=activation,
                      weights_version=weights_version)
