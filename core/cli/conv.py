"""`convsolve conv`: MIOpenDriver-style convolutions, one command line or a file of them, timed
and verified."""
import argparse
import json
import statistics
import sys

import numpy as np

from ..device.handle import Handle
from ..device.tensors import device_buffers, random_tensors, read_output
from ..device.timing import elapsed_ms
from ..engine import search
from ..engine.find import FindMode, find
from ..engine.immediate import compile_solution, get_solutions
from ..engine.plan import run
from ..engine.run import check_device_limits, resolve_solver
from ..errors import ConvsolveError, SolverError, ValidationError
from ..problem import Direction
from ..scale import connect, drive
from ..scale import job as scale_job
from ..solvers.registry import registry, solver_attribute
from ..text import format_bytes, miopen_result, print_table
from . import epilogue_flags as cli_epilogue
from .driver_args import parse_args, parse_file
from .worker import add_cluster_flags

_VERIFY_NAMES = {Direction.FORWARD: "Forward Convolution",
                 Direction.BACKWARD_DATA: "Backward Convolution Data",
                 Direction.BACKWARD_WEIGHTS: "Backward Convolution Weights"}



def _solve_one(handle, problem, args, command, rng, requested):
    """Find or choose, optionally time and verify one problem; returns its JSON report (with -m
    trans, ``requested`` is the transposed convolution's direction that ``problem`` computes)."""
    host = random_tensors(problem, rng)
    buffers = device_buffers(handle, host)
    values, values_host = cli_epilogue.epilogue_args(handle, problem, args, rng)
    report = {"direction": problem.direction.value, "problem": problem.key(),
              "gflop": problem.flops / 1e9}
    if command.transposed:
        report.update(mode="trans", requested=requested.value)
    solver = args.solver or command.solver
    if solver in registry().solvers:
        solutions, chosen = [], solver
    elif solver:   # a family: its fastest solver, as a find of every candidate ranks them
        solutions = [s for s in find(handle, problem, **buffers, **values,
                                     mode=FindMode.HYBRID) if s.family == solver]
        chosen = solutions[0].solver if solutions else None
        if chosen is None:
            raise SolverError(f"no {solver!r} solver works for {problem.key()}")
    elif args.select == "immediate" or command.immediate:
        solutions = get_solutions(handle, problem)
        chosen = solutions[0].solver if solutions else None
    else:
        solutions = find(handle, problem, **buffers, **values, exhaustive=command.exhaustive)
        chosen = solutions[0].solver if solutions else None
    report["solutions"] = [{"solver": s.solver, "family": s.family, "time_ms": s.time_ms,
                            "gflops": problem.flops / s.time_ms / 1e6 if s.time_ms else None,
                            "workspace": s.workspace, "source": s.source} for s in solutions]
    report["source"] = solutions[0].source if solutions else "named"
    report["solver"] = chosen
    if command.bias and problem.direction is not Direction.FORWARD and problem.n and (
            requested is command.requested[-1]):   # -b 1: db once, after the last direction
        report["backward_bias"] = cli_epilogue.bias_report(handle, problem, host, buffers,
                                                           command)
    if chosen is None or problem.n == 0:
        return report
    compile_solution(handle, problem, chosen)
    resolved = resolve_solver(handle, problem, chosen)
    if command.time:
        times = [elapsed_ms(run(handle, problem, chosen, **buffers, **values))
                 for _ in range(command.iterations)]
        report["time_ms"] = statistics.median(times)
        report["miopen"] = miopen_result(   # MIOpen's average: the first run is a warm-up
            problem, requested.value, chosen, resolved.family,
            statistics.mean(times[1:] or times), command.transposed)
    if command.verify:
        run(handle, problem, chosen, **buffers, **values)
        error = cli_epilogue.error(problem, host, values_host,
                                   read_output(handle, problem, buffers))
        tolerance = solver_attribute(resolved, "tolerance")
        report["verify"] = {"ok": bool(error < tolerance), "error": error,
                            "tolerance": tolerance}
    return report


def _solve_command(handle, command, args, rng):
    """Reports of every problem of one DriverCommand."""
    for name in filter(None, (args.solver, command.solver)):
        _check_solver_name(name)
    problems = [cli_epilogue.structure(problem, args) for problem in command.problems]
    check_device_limits(handle, *problems)   # before host tensors are made
    return [_solve_one(handle, problem, args, command, rng, requested)
            for problem, requested in zip(problems, command.requested)]


def _name(report):
    """The report's direction as MIOpenDriver names it, e.g. 'Backward Convolution Data'."""
    name = _VERIFY_NAMES[Direction.parse(report.get("requested", report["direction"]))]
    return f"Transposed {name} (as {report['direction']})" if "mode" in report else name


def _print_report(report, device=None):
    """One problem's text report; ``device`` (the handle's name), when given, is printed first."""
    if device:
        print(f"device: {device}")
    print(f"{_name(report)}: {report['problem']} ({report['gflop']:.3f} GFLOP)")
    if report["source"] == "find-db":
        print("find-db hit: nothing benchmarked")
    elif report["source"] == "fallback":
        print("find-db miss: solutions ranked by the WTI fallback (estimated times, nothing run)")
    rows = [(i, s["solver"], s["family"], f"{s['time_ms']:.4f}",
             f"{s['gflops']:.1f}" if s["gflops"] else "-", format_bytes(s["workspace"]), s["source"])
            for i, s in enumerate(report["solutions"], 1)]
    if rows:
        print_table(rows, ("rank", "solver", "family", "time (ms)", "GFLOP/s", "workspace",
                            "from"))
    print(f"chosen: {report['solver']}")
    if "time_ms" in report:
        print(f"time: {report['time_ms']:.4f} ms, "
              f"{report['gflop'] / report['time_ms'] * 1e3:.1f} GFLOP/s (median of runs)")
        print("\n".join(report["miopen"]))
    verify = report.get("verify")
    if verify and verify["ok"]:
        print(f"{_name(report)} Verifies OK on CPU reference "
              f"({verify['error']:.3g} < {verify['tolerance']:g})")
    elif verify:
        print(f"{_name(report)} FAILED: {verify['error']:.3g} > {verify['tolerance']:g}")
    cli_epilogue.print_bias(report.get("backward_bias", {}))


def _check_solver_name(name):
    """A --solver (or -S) value that is neither an installed solver nor a family is a bad argument."""
    reg = registry()
    if reg.refusal(name):
        raise ValidationError("--solver", name, f"installed but refused: {reg.refusal(name)}")
    if name not in reg.solvers and name not in {s.family for s in reg.solvers.values()}:
        raise ValidationError("--solver", name, f"no solver {name!r} is installed, nor a family "
                              f"of that name; installed: {', '.join(reg.solvers) or 'none'}")


def _failed(reports):
    return any(not part.get("verify", {"ok": True})["ok"]
               for r in reports for part in (r, r.get("backward_bias", {})))


def cmd_conv(args):
    """`convsolve conv`: with a progress bar for find's long searches (-s 1) on a terminal."""
    token = search.PROGRESS.set("auto")
    try:
        return _conv(args)
    finally:
        search.PROGRESS.reset(token)


def _conv(args):
    if args.file:
        return _conv_file(args)
    command, handle = parse_args(args.driver_flags), Handle(profiling=True)   # -t reads events
    reports = _solve_command(handle, command, args, np.random.default_rng(args.seed))
    if args.json:
        print(json.dumps({"device": handle.name, "reports": reports}, indent=2))
    for i, report in enumerate(() if args.json else reports):
        _print_report(report, None if i else handle.name)
    return 1 if _failed(reports) else 0


def _summary(line, r):
    """One --file table row of report ``r``: its time is -t's, else find's benchmark."""
    benchmarked = r["solutions"] and r["source"] != "fallback"
    time_ms = r.get("time_ms", r["solutions"][0]["time_ms"] if benchmarked else None)
    direction = r.get("requested", r["direction"]) + (" (trans)" if "mode" in r else "")
    return (line, r["problem"], direction,
            r["solver"] or "none", f"{time_ms:.4f}" if time_ms else "-",
            f"{r['gflop'] / time_ms * 1e3:.1f}" if time_ms else "-",
            {True: "OK", False: "FAILED", None: "-"}[r.get("verify", {}).get("ok")])


def _conv_file(args):
    """--file: every command line of the file, one table (or JSON) at the end, then how many
    lines failed; exit 2 if a line was refused, else 1 if a verification failed or a line found
    no working solver, else 0."""
    if args.driver_flags:
        raise ValidationError("flag", args.driver_flags[0], "with --file, MIOpenDriver flags "
                              "belong in the file's lines")
    parsed = parse_file(args.file)
    if not parsed:
        raise ValidationError("--file", args.file, "has no command lines")
    if args.cluster:
        _find_on_cluster(args, parsed)
    # profiling: -t reads the runs' events
    handle, rng, lines, code = Handle(profiling=True), np.random.default_rng(args.seed), [], 0
    for number, text, command in parsed:
        lines.append({"line": number, "command": text})
        try:
            if isinstance(command, ValidationError):
                raise command
            lines[-1]["reports"] = _solve_command(handle, command, args, rng)
            code = max(code, int(_failed(lines[-1]["reports"])))
        except ConvsolveError as exc:
            lines[-1]["error"] = str(exc).splitlines()[0]
            code = 2 if isinstance(exc, ValidationError) else max(code, 1)
    failed = sum("error" in line or _failed(line["reports"]) for line in lines)
    if args.json:
        print(json.dumps({"device": handle.name, "lines": lines, "failed": failed}, indent=2))
        return code
    rows = [row for line in lines for row in (
        [_summary(line["line"], r) for r in line.get("reports", ())]
        or [(line["line"], line["command"], "-", f"error: {line['error']}", "-", "-", "-")])]
    print(f"device: {handle.name}")
    print_table(rows, ("line", "problem", "direction", "solver", "time (ms)", "GFLOP/s",
                        "verified"), left=(1, 2, 3))
    if failed:
        print(f"{failed} of {len(lines)} lines failed", file=sys.stderr)
    return code


def find_job(handle, problem, exhaustive):
    """A scale job's runner: [(solver, ms)] of find's ranking of ``problem`` (random tensors)."""
    buffers = device_buffers(handle, random_tensors(problem, 0))
    return [(s.solver, s.time_ms) for s in find(handle, problem, **buffers, exhaustive=exhaustive)]


def _find_on_cluster(args, parsed):
    """--cluster: find the problems of the file's lines that find would rank (no solver named,
    not immediate, no epilogue) on the cluster's device kinds first; the client records them,
    so that the lines then answer from the find-db on a device of those kinds."""
    executor = connect(args.cluster, None, args.compile_workers)
    try:
        kinds = executor.kinds()
        bare = not (args.solver or args.select == "immediate" or args.residual
                    or args.activation)
        problems = {(p.key(), c.exhaustive): p for _, _, c in parsed
                    if bare and not isinstance(c, ValidationError)
                    and not (c.solver or c.immediate) for p in c.problems if p.epilogue is None}
        jobs = [scale_job(f"{__name__}:find_job", p, kind, key, exhaustive=exhaustive)
                for kind in kinds for (key, exhaustive), p in problems.items()]
        summary = drive(executor, jobs, desc="find", done="found")
    finally:
        executor.close()
    print(summary.text("found"), file=sys.stderr)


def add_conv_flags(parser):
    """convsolve's own flags of conv; MIOpenDriver's (driver_args.FLAGS) are parsed apart."""
    flag = parser.add_argument
    flag("--select", choices=("find", "immediate"), default="find",
         help="find (benchmark, per CONVSOLVE_FIND_MODE) or immediate (db or WTI fallback)")
    flag("--solver", help="run this solver (or the best of this family) instead of choosing; "
         "as -S NAME")
    flag("--file", help="run every command line of this file: one table at the end")
    add_cluster_flags(parser)
    cli_epilogue.add_flags(parser)
    add_seed_and_json(parser)


def add_seed_and_json(parser):
    parser.add_argument("--seed", type=_natural, default=0, help="seed of the random tensors (0)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")


def _natural(text):
    """argparse type: an integer >= 0."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected an integer that must be at least 0: {text!r}")
    return int(text)
