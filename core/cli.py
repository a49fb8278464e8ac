"""The `convsolve` command: list solvers and devices, run MIOpenDriver-style convolutions, manage the find-db and perf-db."""
import argparse
import importlib.metadata
import json
import os
import signal
import statistics
import sys

import numpy as np
import pyopencl as cl

from . import __version__, cli_epilogue, db_transfer, docgen, env
from .bench import command as bench_command
from .bench.report import need_matplotlib
from .driver_args import flags_help, parse_args, parse_file, strip_driver
from .errors import ConvsolveError, SolverError, ValidationError
from .execute import check_device_limits, resolve_solver, run
from .explain import explain, explain_text
from .find import FindMode, find
from .find_db import FindDb
from .handle import Handle, describe, list_devices
from .immediate import compile_solution, get_solutions
from .new_plugin import stamp
from .perf_db import PerfDb
from .plugins import ENTRY_POINT_GROUP, registry, solver_attribute
from .problem import Direction, Problem
from .tensors import device_buffers, random_tensors, read_output
from .text import format_bytes, miopen_result, table
from .timing import elapsed_ms
from .tune import add_parser as add_tune_parser
from .tuning import config_key

_VERIFY_NAMES = {Direction.FORWARD: "Forward Convolution",
                 Direction.BACKWARD_DATA: "Backward Convolution Data",
                 Direction.BACKWARD_WEIGHTS: "Backward Convolution Weights"}


def _print_table(rows, headers, left=(0, 1)):
    """Rows under headers, columns padded; the columns at indices ``left`` left-aligned."""
    print(table(rows, headers, left={headers[i] for i in left}))


# {{{ convsolve solvers / devices / env / db

def _refused_code(reg, args):
    """1 when discovery refused a plugin or solver (unless --allow-refused), else 0."""
    return 1 if reg.refused() and not args.allow_refused else 0


def cmd_solvers(args):
    reg = registry()
    _, off = reg.enabled_solvers()
    plugins = [{"name": p.name, "module": p.module, "distribution": p.distribution,
                "version": p.version, "loaded": p.error is None and not p.blocked_by,
                "error": p.error, "blocked_by": p.blocked_by,
                "solvers": p.solvers, "refused_solvers": p.solver_errors} for p in reg.plugins]
    solvers = [{"name": s.name, "family": s.family,
                "directions": [d.value for d in s.directions], "dynamic": s.dynamic,
                "enabled": s.name not in off, "disabled_by": off.get(s.name)}
               for s in reg.solvers.values()]
    if args.json:
        print(json.dumps({"plugins": plugins, "solvers": solvers}, indent=2))
        return _refused_code(reg, args)
    print("plugins:")
    for p in plugins:
        state = ("loaded" if p["loaded"] else f"off ({p['blocked_by']}): not imported"
                 if p["blocked_by"] else f"FAILED: {p['error']}")
        print(f"  {p['name']:<14} {p['distribution'] or p['module']} {p['version'] or ''}  {state}")
        for name, why in p["refused_solvers"].items():
            print(f"      refused solver {name}: {why}")
    print("solvers:")
    _print_table([(s["name"], s["family"], ",".join(s["directions"]),
                   "yes" if s["dynamic"] else "no",
                   "on" if s["enabled"] else f"off ({s['disabled_by']})") for s in solvers],
                 ("solver", "family", "directions", "dynamic", "state"), left=(0, 1, 2, 4))
    return _refused_code(reg, args)


def cmd_devices(args):
    for index, (platform, device) in enumerate(list_devices()):
        print(f"{index}: {describe(platform, device)} ({cl.device_type.to_string(device.type)}, "
              f"{device.max_compute_units} compute units, driver {device.driver_version})")
    return 0


def cmd_env(args):
    if args.markdown:
        print(docgen.env_markdown(), end="")
        return 0
    for var in env.VARS.values():
        print(f"{var.name}={var.raw()}")
    return 0


def cmd_hooks(args):
    print(docgen.hooks_markdown(), end="")
    return 0


def cmd_db(args):
    def _db_time(row):   # a recorded failure has no time: its reason's first line instead
        if row["failure"] is not None or row["time_ms"] is None:
            return f"failed: {(row['failure'] or 'no reason recorded').splitlines()[0][:60]}"
        return f"{row['time_ms']:.4f}"

    if args.action == "export":
        kinds = ("find",) if args.find else ("perf",) if args.perf else db_transfer.KINDS
        counts = db_transfer.export(args.file, kinds, args.device)
        print(f"exported {db_transfer.counted(counts)} to {args.file}")
        return 0
    if args.action == "import":
        if not os.path.isfile(args.file):   # a missing requirement, as a missing --file is
            raise ValidationError("file", args.file, "no such file")
        device = None if args.force else Handle(args.device).db_key
        report = db_transfer.import_file(args.file, device)
        print(report.text())
        return report.code
    db = PerfDb() if args.perf else FindDb()
    if args.action == "path":
        print(f"user:   {db.user_path}\nsystem: {db.system_path}")
    elif args.action == "show":
        rows = db.rows()
        if args.json:
            print(json.dumps(rows, indent=2))
        elif args.perf:
            _print_table([(r["problem"], r["solver"], r["device"], config_key(r["config"]),
                           _db_time(r)) for r in rows],
                         ("problem", "solver", "device", "config", "time (ms)"))
        else:
            _print_table([(r["problem"], r["solver"], r["device"], _db_time(r),
                           format_bytes(r["workspace"])) for r in rows],
                         ("problem", "solver", "device", "time (ms)", "workspace"))
    else:
        print(f"removed {db.clear()} records from {db.user_path}")
    return 0

# }}}


# {{{ convsolve conv

def _solve_one(handle, problem, args, command, rng, requested):
    """Find or choose, optionally time and verify one problem; returns its JSON report (with -m
    trans, ``requested`` is the transposed convolution's direction that ``problem`` computes)."""
    host = random_tensors(problem, rng)
    buffers = device_buffers(handle, host)
    values, values_host = cli_epilogue.values(handle, problem, args, rng)
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
        _print_table(rows, ("rank", "solver", "family", "time (ms)", "GFLOP/s", "workspace",
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
    if args.file:
        return _conv_file(args)
    command, handle = parse_args(args.driver_flags), Handle()
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
    handle, rng, lines, code = Handle(), np.random.default_rng(args.seed), [], 0
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
    _print_table(rows, ("line", "problem", "direction", "solver", "time (ms)", "GFLOP/s",
                        "verified"), left=(1, 2, 3))
    if failed:
        print(f"{failed} of {len(lines)} lines failed", file=sys.stderr)
    return code


def _add_conv_flags(parser):
    """convsolve's own flags of conv; MIOpenDriver's (driver_args.FLAGS) are parsed apart."""
    flag = parser.add_argument
    flag("--select", choices=("find", "immediate"), default="find",
         help="find (benchmark, per CONVSOLVE_FIND_MODE) or immediate (db or WTI fallback)")
    flag("--solver", help="run this solver (or the best of this family) instead of choosing; "
         "as -S NAME")
    flag("--file", help="run every command line of this file: one table at the end")
    cli_epilogue.add_flags(parser)
    _add_seed_and_json(parser)


def _add_seed_and_json(parser):
    parser.add_argument("--seed", type=_natural, default=0, help="seed of the random tensors (0)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")


def _natural(text):
    """argparse type: an integer >= 0."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected an integer that must be at least 0: {text!r}")
    return int(text)

# }}}


# {{{ convsolve explain / new-plugin / bench

def cmd_explain(args):
    problems = [cli_epilogue.structure(problem, args) for problem in (
        [Problem.from_key(args.key)] if args.key else parse_args(args.driver_flags).problems)]
    handle = Handle()
    if not args.no_run:
        check_device_limits(handle, *problems)   # before host tensors are made
    rng = np.random.default_rng(args.seed)
    reports = []
    for problem in problems:
        buffers = None if args.no_run else {
            **device_buffers(handle, random_tensors(problem, rng)),
            **cli_epilogue.values(handle, problem, args, rng)[0]}
        reports.append({"problem": problem.key(), "solvers": explain(handle, problem, buffers)})
    if args.json:
        print(json.dumps({"device": handle.name, "reports": reports}, indent=2))
        return 0
    for report in reports:
        print(f"{report['problem']} on {handle.name}\n{explain_text(report['solvers'])}")
    return 0


def cmd_new_plugin(args):
    target = stamp(args.name, args.dir, args.package, args.family)
    print(f"created {target}: pip install -e {target} && pytest {target}")
    return 0


def cmd_bench(args):
    """`convsolve bench`, --plot's matplotlib checked first: missing, it is a missing requirement
    (exit 2, as README says), before anything is measured."""
    if args.plot:
        try:
            need_matplotlib()
        except ConvsolveError as exc:
            raise ValidationError("--plot", args.plot, str(exc)) from None
    return bench_command.cmd_bench(args)

# }}}


class _Version(argparse.Action):
    """--version: convsolve's version, then each installed plugin's (entry point, distribution
    and version), none of them imported."""

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"convsolve {__version__}")
        for ep in sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP),
                         key=lambda ep: ep.name):
            print(f"  {ep.name:<14} {ep.dist.name} {ep.dist.version}")
        parser.exit()


def build_parser():
    parser = argparse.ArgumentParser(prog="convsolve", description=__doc__)
    parser.add_argument("--version", action=_Version, nargs=0,
                        help="convsolve's version and each installed plugin's")
    sub = parser.add_subparsers(dest="command", required=True)
    solvers = sub.add_parser("solvers", help="plugins and solvers, on or off and why")
    solvers.add_argument("--json", action="store_true")
    solvers.add_argument("--allow-refused", action="store_true",
                         help="exit 0 even when a plugin or solver was refused")
    solvers.set_defaults(func=cmd_solvers)
    sub.add_parser("devices", help="OpenCL devices (indices for CONVSOLVE_DEVICE)").set_defaults(
        func=cmd_devices)
    env_parser = sub.add_parser("env", help="every CONVSOLVE_* variable and its value")
    env_parser.add_argument("--markdown", action="store_true", help="the docs table")
    env_parser.set_defaults(func=cmd_env)
    sub.add_parser("hooks", help="the solver contract (the body of docs/hooks.md)").set_defaults(
        func=cmd_hooks)
    conv = sub.add_parser("conv", help="run a convolution as MIOpenDriver does", allow_abbrev=False,
                          formatter_class=argparse.RawDescriptionHelpFormatter,
                          usage="convsolve conv [MIOpenDriver conv flags] [options]",
                          epilog=f"MIOpenDriver conv's flags (MIOpen's defaults):\n{flags_help()}")
    _add_conv_flags(conv)
    conv.set_defaults(func=cmd_conv)
    explain_parser = sub.add_parser("explain", help="what became of every solver for a problem",
                                    allow_abbrev=False)
    _add_seed_and_json(explain_parser)
    cli_epilogue.add_flags(explain_parser)
    explain_parser.add_argument("--key", help="the problem as a key (instead of the flags)")
    explain_parser.add_argument("--no-run", action="store_true",
                                help="do not build or time anything")
    explain_parser.set_defaults(func=cmd_explain)
    new_plugin = sub.add_parser("new-plugin", help="stamp a new plugin from the template")
    new_plugin.add_argument("name", help="plugin name: lowercase, e.g. acme")
    new_plugin.add_argument("--dir", default=".", help="where to create it (.)")
    new_plugin.add_argument("--package", help="its Python package (convsolve_NAME)")
    new_plugin.add_argument("--family", help="its solver's family (direct)")
    new_plugin.set_defaults(func=cmd_new_plugin)
    db = sub.add_parser("db", help="the find-db and the perf-db: files, records, export, import")
    db_sub = db.add_subparsers(dest="action", required=True)
    for action, text in (("path", "the user and system dbs' files"),
                         ("show", "the user db's records"), ("clear", "empty the user db")):
        part = db_sub.add_parser(action, help=text)
        part.add_argument("--perf", action="store_true", help="the perf-db, not the find-db")
        part.add_argument("--json", action="store_true")
    export = db_sub.add_parser("export", help="the user dbs' records to a JSON-lines file")
    export.add_argument("file")
    kinds = export.add_mutually_exclusive_group()
    kinds.add_argument("--find", action="store_true", help="only the find-db")
    kinds.add_argument("--perf", action="store_true", help="only the perf-db")
    export.add_argument("--device", metavar="SUBSTRING", help="only devices whose key has it")
    import_ = db_sub.add_parser("import", help="an export's records into the user dbs, keeping "
                                "local records that are as fast or faster")
    import_.add_argument("file")
    import_.add_argument("--force", action="store_true", help="also other devices' records")
    import_.add_argument("--device", metavar="SPEC", help="this machine's device, as "
                         "CONVSOLVE_DEVICE names it (default: as the other commands choose)")
    db.set_defaults(func=cmd_db)
    bench_command.add_parser(sub).set_defaults(func=cmd_bench)
    add_tune_parser(sub)
    return parser


def main(argv=None):
    """The command: a pasted MIOpenDriver line works whole (its driver path is dropped)."""
    parser = build_parser()
    try:
        try:
            argv = strip_driver(sys.argv[1:] if argv is None else argv)
            args, args.driver_flags = parser.parse_known_args(argv)   # MIOpenDriver's flags
            if args.driver_flags and args.command not in ("conv", "explain"):
                parser.error(f"unrecognized arguments: {' '.join(args.driver_flags)}")
            env.configure_logging()
            return args.func(args)
        finally:   # a closed pipe or a full disk shows here, not in the interpreter's exit
            sys.stdout.flush()
    except ValidationError as exc:
        print(f"convsolve: error: {exc}", file=sys.stderr)
        return 2
    except ConvsolveError as exc:
        print(f"convsolve: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 1
    except OSError as exc:   # a reader that left (`| head -1`), a full disk (`> /dev/full`)
        if exc.filename is None:   # stdout's: what it holds goes, so exit's flush fails no more
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        if isinstance(exc, BrokenPipeError):
            return 128 + signal.SIGPIPE   # quietly, as if by SIGPIPE
        print(f"convsolve: error: {exc.filename or 'cannot write the output'}: "
              f"{exc.strerror or exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
