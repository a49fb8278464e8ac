"""`convsolve tune`: search the configs of every tunable solver for a network's layers or a file
of problems, keep them in the perf-db, and print default-vs-tuned times per layer and in all.

Per problem: the tunable applicable solvers are searched (search.py, within the budget; a
composite's or rank candidate's solver on the problem it runs), then find benchmarks every
applicable solver with its tuned config and records the ranking in the
find-db.  "default" is the fastest time with every tunable solver at its default config, "tuned"
the fastest with its tuned one: both configs of each tunable solver are timed one after the
other in this run, the other solvers' times are find's.  Resumable: a (problem, solver) with a
user perf-db entry is not searched again unless ``--retune``; an interrupted run says how far it
got.
"""
import signal
import sys
from dataclasses import astuple

import pyopencl as cl

from .. import env
from ..bench.command import layer_problem, load_suite, parse_directions, select_layers
from ..device.tensors import device_buffers, random_tensors
from ..device.timing import time_invoker
from ..engine.find import FindMode, find, tune_solvers
from ..engine.fusion import candidates
from ..engine.search import STRATEGIES, Budget, config_for, tuning_groups
from ..errors import ValidationError
from ..hookspecs import Buffers
from ..problem import Problem
from ..scale import InProcess, connect, drive
from ..scale import job as scale_job
from ..solvers.calls import default_config_of, is_tunable, workspace_of
from ..text import table
from ..tuning import config_key
from .driver_args import parse_file
from .worker import add_cluster_flags

#: `convsolve tune`'s default budget per solver and problem: small enough that ResNet-50's
#: layers tune in minutes on a CPU (programs are shared between layers: most configs build once).
DEFAULT_BUDGET = Budget(configs=24, seconds=8.0, patience=8)
#: tune's jobs get no compile job ahead of them (scale/workers.py): it would build find's
#: configs, which the search builds and times first anyway, not the search's own (the search
#: hands its configs to the compile workers itself, where they build ahead); on the 2-core Xeon
#: (PoCL, cold caches, tiny suite, 3 directions) a local cluster with one compile worker took
#: 115 s against one process's 88 s (2026-12-03, under load), before every PoCL worker ran
#: whole jobs (1.34x then: BENCHMARKS.md, "Scale-out").
AHEAD = False


def problems_of(args):
    """[(label, Problem)] from --suite (with --batch, --layers, --directions) or --file (one
    MIOpenDriver command line or Problem.key() per line)."""
    if bool(args.suite) == bool(args.file):
        raise ValidationError("--suite/--file", None, "give one of them")
    directions = parse_directions(args.directions)
    if args.suite:
        suite = load_suite(args.suite)
        layers, batch = select_layers(suite["layers"], args.layers), args.batch
        if batch is None and not all("n" in layer for _, layer in layers):   # as bench does
            batch = suite.get("batch", 8)
        return [(f"{index}:{layer['name']}", layer_problem(layer, batch, direction))
                for index, layer in layers for direction in directions]
    found = []
    for number, text, command in parse_file(args.file):
        if isinstance(command, ValidationError):
            try:
                found.append((f"line {number}", Problem.from_key(text.strip())))
            except (ValidationError, ValueError):
                raise ValidationError(f"{args.file} line {number}", text,
                                      f"neither a problem key nor a command line: {command}")
            continue
        found += [(f"line {number}", p) for p in command.problems]
    return found


def _paired_times(handle, problem, solver, buffers):
    """(ms of ``solver``'s default config, ms of the config it builds now), timed one after the
    other (once when they are the same config)."""
    need = workspace_of(solver, problem, handle)
    scratch = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, need) if need else None
    budget_ms = env.positive_number(env.FIND_SOLVER_BUDGET_MS)
    configs = (default_config_of(solver, problem, handle), config_for(solver, problem, handle))
    times = {}
    for config in configs:
        if config_key(config) not in times:
            times[config_key(config)] = time_invoker(handle.invoker(solver, problem, config),
                                                     buffers, scratch, budget_ms)
    return tuple(times[config_key(config)] for config in configs)


def tune_problem(handle, problem, budget, strategy, retune):
    """(default ms, tuned ms, tuned winner) of one problem; records the perf-db and the find-db.

    A tunable solver's two times are measured side by side now (_paired_times), never a time
    stored by an earlier run beside a fresh one; the other solvers' come from find's benchmark,
    which ranks every solver with its tuned config.  Everything runs on ``handle``'s profiling
    queue (Handle.timing), on buffers of its own.
    """
    handle = handle.timing
    buffers = device_buffers(handle, random_tensors(problem, 0))
    groups = tuning_groups(problem, candidates(problem)[0])   # composites' solvers on their own
    for tuned, solvers in groups.items():
        tune_solvers(handle, tuned, solvers, Buffers(**buffers), None, budget, retune, strategy)
    ranked = find(handle, problem, **buffers, mode=FindMode.NORMAL)   # tuned configs now
    default = {solution.solver: solution.time_ms for solution in ranked}
    best = dict(default)
    for solver in filter(is_tunable, groups.get(problem, [])):
        if solver.name in default:   # find timed it: it builds and runs
            default[solver.name], best[solver.name] = _paired_times(handle, problem, solver,
                                                                    Buffers(**buffers))
    winner = min(best, key=best.get)
    return min(default.values()), best[winner], winner


def _budget(args):
    """--budget-configs, --budget-s and --patience, else the CONVSOLVE_TUNING_* variable that is
    set, else DEFAULT_BUDGET's."""
    from_env = Budget.from_env()
    return Budget(*(given if given is not None else value if var.is_set() else default
                    for given, var, value, default in zip(
                        (args.budget_configs, args.budget_s, args.patience),
                        (env.TUNING_BUDGET_CONFIGS, env.TUNING_BUDGET_S, env.TUNING_PATIENCE),
                        astuple(from_env), astuple(DEFAULT_BUDGET))))


def tune_job(handle, problem, budget, strategy, retune=False):
    """A scale job's runner: tune_problem's (default ms, tuned ms, winner), budget a list."""
    return tune_problem(handle, problem, Budget(*budget), strategy, retune)


def cmd_tune(args):
    budget = _budget(args)
    problems = problems_of(args)
    executor = connect(args.cluster, args.device, args.compile_workers)
    rows, interrupted = {}, False
    try:
        kinds = executor.kinds()
        jobs = [scale_job(f"{__name__}:tune_job", problem, kind,
                          f"{kind} {label}" if len(kinds) > 1 else label, [("retune", args.retune)],
                          AHEAD, budget=list(astuple(budget)), strategy=args.strategy)
                for kind in kinds for label, problem in problems]

        def row(job, value, error, before=False):
            direction = Problem.from_key(job.problem).direction.value
            if error:
                rows[job.id] = (job.label, direction, "-", "-", "-",
                                f"failed: {error.splitlines()[0][:60]}")
            else:
                default_ms, tuned_ms, winner = value
                rows[job.id] = (job.label, direction, f"{default_ms:.4f}", f"{tuned_ms:.4f}",
                                f"{default_ms / tuned_ms:.2f}x",
                                winner + (" (done before)" if before else ""))
        try:
            summary = drive(executor, jobs, lambda job, r: row(job, r.value, r.error), "tune",
                            args.quiet, again=args.retune, done="tuned")
            for job, value in summary.skipped:
                row(job, value, None, before=True)
        except KeyboardInterrupt:   # Ctrl-C: the table of the problems done, then how far it got
            interrupted, summary = True, None
    finally:
        executor.close()
    done = [rows[job.id] for job in jobs if job.id in rows]
    timed = [r for r in done if r[2] != "-"]
    total_default = sum(float(r[2]) for r in timed)
    total_tuned = sum(float(r[3]) for r in timed)
    done.append(("all", "", f"{total_default:.4f}", f"{total_tuned:.4f}",
                 f"{total_default / total_tuned:.2f}x" if total_tuned else "-", ""))
    device = executor.handle.name if isinstance(executor, InProcess) else ", ".join(kinds)
    print(f"device: {device}")
    print(table(done, ("layer", "dir", "default (ms)", "tuned (ms)", "speedup", "tuned winner")))
    if interrupted:
        print(f"convsolve tune: interrupted, {len(done) - 1} of {len(jobs)} done; run again to "
              "resume", file=sys.stderr)
        return 128 + signal.SIGINT
    if not args.quiet or summary.failed:
        print(summary.text("tuned"), file=sys.stderr)
    return 0


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "tune", help="tune every tunable solver on a suite's layers or a file of problems",
        description=__doc__.splitlines()[0])
    parser.add_argument("--suite", help="a shipped suite (resnet50, ...) or a .json path")
    parser.add_argument("--file", help="one MIOpenDriver conv line or Problem.key() per line")
    parser.add_argument("--batch", type=int, help="batch size of the suite's layers (as bench: "
                        "each layer's own n, else the suite's batch, 8)")
    parser.add_argument("--layers", help="suite layers: indices, ranges a-b or names (all)")
    parser.add_argument("--directions", default="fwd", help="comma list of fwd, bwd, wrw, or all")
    parser.add_argument("--budget-configs", type=int, help="most configs per solver and problem "
                        f"({env.TUNING_BUDGET_CONFIGS.name} if set, else {DEFAULT_BUDGET.configs})")
    parser.add_argument("--budget-s", type=float, help="most seconds per solver and problem "
                        f"({env.TUNING_BUDGET_S.name} if set, else {DEFAULT_BUDGET.seconds:g})")
    parser.add_argument("--patience", type=int, help="stop after this many configs without a 1%% "
                        f"gain ({env.TUNING_PATIENCE.name} if set, else {DEFAULT_BUDGET.patience})")
    parser.add_argument("--strategy", choices=STRATEGIES, default="auto")
    parser.add_argument("--retune", action="store_true",
                        help="search again where the perf-db already has a config")
    parser.add_argument("--device", help="device index or substring (CONVSOLVE_DEVICE); with a "
                        "cluster's address, a substring of the device kinds to tune")
    add_cluster_flags(parser)
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(func=cmd_tune)
