"""The `convsolve` command: list solvers and devices, run MIOpenDriver-style convolutions, manage the find-db."""
import argparse
import json
import os
import signal
import statistics
import sys

import numpy as np
import pyopencl as cl

from . import docgen, env
from .bench.command import add_parser as add_bench_parser
from .errors import ConvsolveError, SolverError, ValidationError
from .execute import check_device_limits, resolve_solver, run
from .explain import explain
from .find import FindMode, find
from .find_db import FindDb, system_db_path
from .handle import Handle, describe, list_devices
from .immediate import compile_solution, get_solutions
from .new_plugin import stamp
from .plugins import registry, solver_attribute
from .problem import Direction, Problem
from .tensors import device_buffers, random_tensors, read_output
from .text import format_bytes, table
from .timing import elapsed_ms
from .verify import error_against_reference

_DIRECTION_BITS = {1: Direction.FORWARD, 2: Direction.BACKWARD_DATA, 4: Direction.BACKWARD_WEIGHTS}
_VERIFY_NAMES = {Direction.FORWARD: "Forward Convolution",
                 Direction.BACKWARD_DATA: "Backward Convolution Data",
                 Direction.BACKWARD_WEIGHTS: "Backward Convolution Weights"}


def _print_table(rows, headers, left=(0, 1)):
    """Rows under headers, columns padded; the columns at indices ``left`` left-aligned."""
    print(table(rows, headers, left={headers[i] for i in left}))


# {{{ convsolve solvers / devices / env / db

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
        return 0
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
    return 0


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

    db = FindDb()
    if args.action == "path":
        print(f"user:   {db.user_path}\nsystem: {system_db_path()}")
    elif args.action == "show":
        rows = db.rows()
        if args.json:
            print(json.dumps(rows, indent=2))
        else:
            _print_table([(r["problem"], r["solver"], r["device"], _db_time(r),
                           format_bytes(r["workspace"])) for r in rows],
                         ("problem", "solver", "device", "time (ms)", "workspace"))
    else:
        print(f"removed {db.clear()} records from {db.user_path}")
    return 0

# }}}


# {{{ convsolve conv

def _problems(args):
    bits = [bit for bit in (1, 2, 4) if args.forw & bit] if args.forw else [1, 2, 4]
    if args.forw < 0 or args.forw > 7:
        raise ValidationError("-F", args.forw, "expected 0 (all) or a sum of 1, 2 and 4")
    x_shape = (args.batchsize, args.in_channels, args.in_h, args.in_w)
    groups = args.group_count
    divides = groups > 0 and args.in_channels % groups == 0   # else Problem names the groups
    w_shape = (args.out_channels, args.in_channels // groups if divides else args.in_channels,
               args.fil_h, args.fil_w)
    return [Problem.conv2d(x_shape, w_shape, stride=(args.conv_stride_h, args.conv_stride_w),
                           padding=(args.pad_h, args.pad_w),
                           dilation=(args.dilation_h, args.dilation_w), groups=groups,
                           direction=_DIRECTION_BITS[bit]) for bit in bits]


def _solve_one(handle, problem, args, rng):
    """Find or choose, optionally time and verify one problem; returns its JSON report."""
    host = random_tensors(problem, rng)
    buffers = device_buffers(handle, host)
    report = {"direction": problem.direction.value, "problem": problem.key(),
              "gflop": problem.flops / 1e9}
    if args.solver in registry().solvers:
        solutions, chosen = [], args.solver
    elif args.solver:   # a family: its fastest solver, as a find of every candidate ranks them
        solutions = [s for s in find(handle, problem, **buffers, mode=FindMode.HYBRID)
                     if s.family == args.solver]
        chosen = handle.best_of_family(problem, args.solver)
        if chosen is None:
            raise SolverError(f"no {args.solver!r} solver works for {problem.key()}")
    elif args.search == "immediate":
        solutions = get_solutions(handle, problem)
        chosen = solutions[0].solver if solutions else None
    else:
        solutions = find(handle, problem, **buffers)
        chosen = solutions[0].solver if solutions else None
    report["solutions"] = [{"solver": s.solver, "family": s.family, "time_ms": s.time_ms,
                            "gflops": problem.flops / s.time_ms / 1e6 if s.time_ms else None,
                            "workspace": s.workspace, "source": s.source} for s in solutions]
    report["source"] = solutions[0].source if solutions else "named"
    report["solver"] = chosen
    if chosen is None or problem.n == 0:
        return report
    compile_solution(handle, problem, chosen)
    if args.time:
        times = [elapsed_ms(run(handle, problem, chosen, **buffers)) for _ in range(args.iter)]
        report["time_ms"] = statistics.median(times)
    if args.verify:
        run(handle, problem, chosen, **buffers)
        error = error_against_reference(problem, host, read_output(handle, problem, buffers))
        tolerance = solver_attribute(resolve_solver(handle, problem, chosen), "tolerance")
        report["verify"] = {"ok": bool(error < tolerance), "error": error,
                            "tolerance": tolerance}
    return report


def _print_report(problem, report, device=None):
    """One problem's text report; ``device`` (the handle's name), when given, is printed first."""
    if device:
        print(f"device: {device}")
    print(f"{_VERIFY_NAMES[problem.direction]}: {report['problem']} "
          f"({report['gflop']:.3f} GFLOP)")
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
              f"{problem.flops / report['time_ms'] / 1e6:.1f} GFLOP/s (median of runs)")
    verify = report.get("verify")
    if verify and verify["ok"]:
        print(f"{_VERIFY_NAMES[problem.direction]} Verifies OK on CPU reference "
              f"({verify['error']:.3g} < {verify['tolerance']:g})")
    elif verify:
        print(f"{_VERIFY_NAMES[problem.direction]} FAILED: {verify['error']:.3g} > "
              f"{verify['tolerance']:g}")


def _check_solver_name(name):
    """A --solver value that is neither an installed solver nor a family is a bad argument."""
    reg = registry()
    if name not in reg.solvers and name not in {s.family for s in reg.solvers.values()}:
        raise ValidationError("--solver", name, f"no solver {name!r} is installed, nor a family "
                              f"of that name; installed: {', '.join(reg.solvers) or 'none'}")


def cmd_conv(args):
    problems = _problems(args)
    if args.solver:
        _check_solver_name(args.solver)
    handle = Handle()
    check_device_limits(handle, *problems)   # before host tensors are made
    rng = np.random.default_rng(args.seed)
    reports = []
    for problem in problems:
        report = _solve_one(handle, problem, args, rng)
        reports.append(report)
        if not args.json:
            _print_report(problem, report, handle.name if not reports[:-1] else None)
    if args.json:
        print(json.dumps({"device": handle.name, "reports": reports}, indent=2))
    return 1 if any(not r.get("verify", {"ok": True})["ok"] for r in reports) else 0


def _add_problem_flags(parser):
    """MIOpenDriver's problem flags, with its defaults where they make sense here."""
    flag = parser.add_argument
    flag("-n", "--batchsize", type=int, default=100, help="batch size (100)")
    flag("-c", "--in_channels", type=int, default=3, help="input channels (3)")
    flag("-H", "--in_h", type=int, default=32, help="input height (32)")
    flag("-W", "--in_w", type=int, default=32, help="input width (32)")
    flag("-k", "--out_channels", type=int, default=32, help="output channels (32)")
    flag("-y", "--fil_h", type=int, default=3, help="filter height (3)")
    flag("-x", "--fil_w", type=int, default=3, help="filter width (3)")
    flag("-p", "--pad_h", type=int, default=0, help="zero padding of height, both sides (0)")
    flag("-q", "--pad_w", type=int, default=0, help="zero padding of width, both sides (0)")
    flag("-u", "--conv_stride_h", type=int, default=1, help="vertical stride (1)")
    flag("-v", "--conv_stride_w", type=int, default=1, help="horizontal stride (1)")
    flag("-l", "--dilation_h", type=int, default=1, help="vertical dilation (1)")
    flag("-j", "--dilation_w", type=int, default=1, help="horizontal dilation (1)")
    flag("-g", "--group_count", type=int, default=1, help="groups (1)")
    flag("-F", "--forw", type=int, default=0,
         help="directions: 1 forward, 2 backward-data, 4 backward-weights, sums allowed; 0 all (0)")
    flag("--seed", type=_natural, default=0, help="seed of the random tensors (0)")
    flag("--json", action="store_true", help="print JSON instead of tables")


def _int_at_least(minimum):
    """argparse type: an integer >= ``minimum``."""
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value
    return parse


_positive_int, _natural = _int_at_least(1), _int_at_least(0)


def _add_conv_flags(parser):
    """MIOpenDriver's run flags: verification, timing, search mode, a forced solver."""
    _add_problem_flags(parser)
    flag = parser.add_argument
    flag("-V", "--verify", type=int, default=1, choices=(0, 1), help="verify against numpy (1)")
    flag("-t", "--time", type=int, default=0, choices=(0, 1), help="time the chosen solver (0)")
    flag("-i", "--iter", type=_positive_int, default=10, help="timed iterations with -t 1 (10)")
    flag("-S", "--search", choices=("find", "immediate"), default="find",
         help="find (benchmark, per CONVSOLVE_FIND_MODE) or immediate (db or WTI fallback)")
    flag("--solver", help="run this solver (or the best of this family) instead of choosing")

# }}}


# {{{ convsolve explain / new-plugin

def cmd_explain(args):
    problems = [Problem.from_key(args.key)] if args.key else _problems(args)
    handle = Handle()
    if not args.no_run:
        check_device_limits(handle, *problems)   # before host tensors are made
    rng = np.random.default_rng(args.seed)
    reports = []
    for problem in problems:
        buffers = None if args.no_run else device_buffers(handle, random_tensors(problem, rng))
        reports.append({"problem": problem.key(), "solvers": explain(handle, problem, buffers)})
    if args.json:
        print(json.dumps({"device": handle.name, "reports": reports}, indent=2))
        return 0
    for report in reports:
        print(f"{report['problem']} on {handle.name}")
        rows = []
        for row in report["solvers"]:
            db = (f"{row['db_time_ms']:.4f} ms ({row['db_source']} db)"
                  if row["db_time_ms"] is not None else "-")
            rows.append((row["solver"], row["family"],
                         "-" if row["wti"] is None else f"{row['wti']:.3g}",
                         "-" if row["workspace"] is None else format_bytes(row["workspace"]),
                         "-" if row["time_ms"] is None else f"{row['time_ms']:.4f}", db,
                         row["status"].splitlines()[0]))
        _print_table(rows, ("solver", "family", "WTI", "workspace", "time (ms)", "find-db record",
                            "status"), left=(0, 1, 6))
        for row in report["solvers"]:
            for line in row["status"].splitlines()[1:]:
                print(f"    {row['solver']}: {line}")
    return 0


def cmd_new_plugin(args):
    target = stamp(args.name, args.dir)
    print(f"created {target}: pip install -e {target} && pytest {target}")
    return 0

# }}}


def build_parser():
    parser = argparse.ArgumentParser(prog="convsolve", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    solvers = sub.add_parser("solvers", help="plugins and solvers, on or off and why")
    solvers.add_argument("--json", action="store_true")
    solvers.set_defaults(func=cmd_solvers)
    sub.add_parser("devices", help="OpenCL devices (indices for CONVSOLVE_DEVICE)").set_defaults(
        func=cmd_devices)
    env_parser = sub.add_parser("env", help="every CONVSOLVE_* variable and its value")
    env_parser.add_argument("--markdown", action="store_true", help="the docs table")
    env_parser.set_defaults(func=cmd_env)
    sub.add_parser("hooks", help="the solver contract (the body of docs/hooks.md)").set_defaults(
        func=cmd_hooks)
    conv = sub.add_parser("conv", help="run a convolution as MIOpenDriver does")
    _add_conv_flags(conv)
    conv.set_defaults(func=cmd_conv)
    explain_parser = sub.add_parser("explain", help="what became of every solver for a problem")
    _add_problem_flags(explain_parser)
    explain_parser.add_argument("--key", help="the problem as a key (instead of the flags)")
    explain_parser.add_argument("--no-run", action="store_true",
                                help="do not build or time anything")
    explain_parser.set_defaults(func=cmd_explain)
    new_plugin = sub.add_parser("new-plugin", help="stamp a new plugin from the template")
    new_plugin.add_argument("name", help="plugin name: lowercase, e.g. acme")
    new_plugin.add_argument("--dir", default=".", help="where to create it (.)")
    new_plugin.set_defaults(func=cmd_new_plugin)
    db = sub.add_parser("db", help="the find-db")
    db.add_argument("action", choices=("path", "show", "clear"))
    db.add_argument("--json", action="store_true")
    db.set_defaults(func=cmd_db)
    add_bench_parser(sub)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        env.configure_logging()
        code = args.func(args)
        sys.stdout.flush()   # a closed pipe shows here, not in the interpreter's exit
        return code
    except BrokenPipeError:
        # the reader left (`convsolve devices | head -1`): stop quietly, as if by SIGPIPE
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except ValidationError as exc:
        print(f"convsolve: error: {exc}", file=sys.stderr)
        return 2
    except ConvsolveError as exc:
        print(f"convsolve: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
