"""`convsolve tune`: search the configs of every tunable solver for a network's layers or a file
of problems, keep them in the perf-db, and print default-vs-tuned times per layer and in all.

Per problem: the tunable applicable solvers are searched (search.py, within the budget), then
find benchmarks every applicable solver with its tuned config and records the ranking in the
find-db.  "default" is the fastest time with every tunable solver at its default config (from
the search's first trial), "tuned" the fastest after.  Resumable: a (problem, solver) with a
user perf-db entry is not searched again unless ``--retune``; its default and tuned times come
from the perf-db's trials.
"""
import sys

import tqdm

from ..bench.command import layer_problem, load_suite, parse_directions, select_layers
from ..db.perf_db import PerfDb
from ..device.handle import Handle
from ..device.tensors import device_buffers, random_tensors
from ..engine.find import FindMode, find, tune_solvers
from ..engine.search import STRATEGIES, Budget
from ..errors import ConvsolveError, ValidationError
from ..hookspecs import Buffers
from ..problem import Problem
from ..solvers.calls import default_config_of, is_tunable
from ..solvers.registry import registry
from ..text import table
from ..tuning import config_key
from .driver_args import parse_file

#: `convsolve tune`'s default budget per solver and problem: small enough that ResNet-50's
#: layers tune in minutes on a CPU (programs are shared between layers: most configs build once).
DEFAULT_BUDGET = Budget(configs=24, seconds=8.0, patience=8)


def problems_of(args):
    """[(label, Problem)] from --suite (with --batch, --layers, --directions) or --file (one
    MIOpenDriver command line or Problem.key() per line)."""
    if bool(args.suite) == bool(args.file):
        raise ValidationError("--suite/--file", None, "give one of them")
    directions = parse_directions(args.directions)
    if args.suite:
        suite = load_suite(args.suite)
        return [(f"{index}:{layer['name']}", layer_problem(layer, args.batch, direction))
                for index, layer in select_layers(suite["layers"], args.layers)
                for direction in directions]
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


def _default_time(handle, problem, solver):
    """The default config's time among the perf-db's trials of ``solver``, or None."""
    default = config_key(default_config_of(solver, problem, handle))
    return next((t.time_ms for t in PerfDb().trials(handle.db_key, problem.key(), solver.name)
                 if config_key(t.config) == default and t.time_ms is not None), None)


def tune_problem(handle, problem, budget, strategy, retune):
    """(default ms, tuned ms, tuned winner) of one problem; records the perf-db and the find-db.

    A tunable solver's two times come from one search (its default config's trial and its best
    trial, or the perf-db's trials when resumed), so they are measured side by side; the other
    solvers' from find's benchmark, which ranks every solver with its tuned config.
    """
    buffers = device_buffers(handle, random_tensors(problem, 0))
    tunable = [s for s in registry().candidates(problem)[0] if is_tunable(s)]
    outcomes = {o.solver: o for o in tune_solvers(handle, problem, tunable, Buffers(**buffers),
                                                  None, budget, retune, strategy)}
    ranked = find(handle, problem, **buffers, mode=FindMode.NORMAL)   # tuned configs now
    default, tuned = {}, {}
    for solution in ranked:
        default[solution.solver] = tuned[solution.solver] = solution.time_ms
    for solver in tunable:
        if solver.name in outcomes:
            outcome = outcomes[solver.name]
            default[solver.name], tuned[solver.name] = outcome.default.time_ms, outcome.best.time_ms
        elif (time_ms := _default_time(handle, problem, solver)) is not None:
            default[solver.name] = time_ms
    winner = min(tuned, key=tuned.get)
    return min(default.values()), tuned[winner], winner


def cmd_tune(args):
    handle = Handle(args.device)
    budget = Budget(args.budget_configs, args.budget_s, args.patience)
    problems = problems_of(args)
    rows, total_default, total_tuned = [], 0.0, 0.0
    bar = tqdm.tqdm(problems, desc="tune", unit="problem", file=sys.stderr,
                    disable=args.quiet or None)
    for label, problem in bar:
        bar.set_postfix_str(label)
        try:
            default_ms, tuned_ms, winner = tune_problem(handle, problem, budget, args.strategy,
                                                        args.retune)
        except ConvsolveError as exc:
            rows.append((label, problem.direction.value, "-", "-", "-",
                         f"failed: {str(exc).splitlines()[0][:60]}"))
            continue
        total_default += default_ms
        total_tuned += tuned_ms
        rows.append((label, problem.direction.value, f"{default_ms:.4f}", f"{tuned_ms:.4f}",
                     f"{default_ms / tuned_ms:.2f}x", winner))
    rows.append(("all", "", f"{total_default:.4f}", f"{total_tuned:.4f}",
                 f"{total_default / total_tuned:.2f}x" if total_tuned else "-", ""))
    print(f"device: {handle.name}")
    print(table(rows, ("layer", "dir", "default (ms)", "tuned (ms)", "speedup", "tuned winner")))
    return 0


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "tune", help="tune every tunable solver on a suite's layers or a file of problems",
        description=__doc__.splitlines()[0])
    parser.add_argument("--suite", help="a shipped suite (resnet50, ...) or a .json path")
    parser.add_argument("--file", help="one MIOpenDriver conv line or Problem.key() per line")
    parser.add_argument("--batch", type=int, help="batch size of the suite's layers")
    parser.add_argument("--layers", help="suite layers: indices, ranges a-b or names (all)")
    parser.add_argument("--directions", default="fwd", help="comma list of fwd, bwd, wrw, or all")
    parser.add_argument("--budget-configs", type=int, default=DEFAULT_BUDGET.configs,
                        help="most configs per solver and problem (%(default)s)")
    parser.add_argument("--budget-s", type=float, default=DEFAULT_BUDGET.seconds,
                        help="most seconds per solver and problem (%(default)s)")
    parser.add_argument("--patience", type=int, default=DEFAULT_BUDGET.patience,
                        help="stop after this many configs without a 1%% gain (%(default)s)")
    parser.add_argument("--strategy", choices=STRATEGIES, default="auto")
    parser.add_argument("--retune", action="store_true",
                        help="search again where the perf-db already has a config")
    parser.add_argument("--device", help="device index or substring (CONVSOLVE_DEVICE)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(func=cmd_tune)
