"""The `convsolve` command: list solvers and devices, run MIOpenDriver-style convolutions, manage the find-db and perf-db."""
import argparse
import importlib.metadata
import json
import os
import signal
import sys

import numpy as np
import pyopencl as cl

from .. import env
from ..bench import command as bench_command
from ..bench.report import need_matplotlib
from ..db import transfer as db_transfer
from ..db.find_db import FindDb
from ..db.journal import Journal
from ..db.perf_db import PerfDb
from ..device.handle import Handle, describe, list_devices
from ..device.tensors import device_buffers, random_tensors
from ..engine.run import check_device_limits
from ..errors import ConvsolveError, ValidationError
from ..problem import Direction, Problem
from ..solvers.registry import ENTRY_POINT_GROUP, registry
from ..text import format_bytes, print_table
from ..tuning import config_key
from . import docgen
from . import epilogue_flags as cli_epilogue
from .conv import add_conv_flags, add_seed_and_json, cmd_conv
from .driver_args import flags_help, parse_args, strip_driver
from .explain import explain, explain_text
from .heuristics import add_parser as add_heuristics_parser
from .new_plugin import stamp
from .tune import add_parser as add_tune_parser
from .worker import add_parser as add_worker_parser

_VERIFY_NAMES = {Direction.FORWARD: "Forward Convolution",
                 Direction.BACKWARD_DATA: "Backward Convolution Data",
                 Direction.BACKWARD_WEIGHTS: "Backward Convolution Weights"}


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
    print_table([(s["name"], s["family"], ",".join(s["directions"]),
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
    if args.action in ("import", "merge"):
        files = args.files if args.action == "merge" else [args.file]
        for path in files:   # a missing one is a missing requirement, as a missing --file is
            if not os.path.isfile(path):
                raise ValidationError("file", path, "no such file")
        device = None if args.force else Handle(args.device).db_key
        reports = [db_transfer.import_file(path, device) for path in files]
        print("\n".join(report.text() for report in reports))
        return max(report.code for report in reports)
    db = PerfDb() if args.perf else FindDb()
    if args.action == "path":
        print(f"user:   {db.user_path}\nsystem: {db.system_path}")
    elif args.action == "show":
        rows = db.rows()
        if args.json:
            print(json.dumps(rows, indent=2))
        elif args.perf:
            print_table([(r["problem"], r["solver"], r["device"], config_key(r["config"]),
                           _db_time(r)) for r in rows],
                         ("problem", "solver", "device", "config", "time (ms)"))
        else:
            print_table([(r["problem"], r["solver"], r["device"], _db_time(r),
                           format_bytes(r["workspace"])) for r in rows],
                         ("problem", "solver", "device", "time (ms)", "workspace"))
    else:
        print(f"removed {db.clear()} records from {db.user_path}")
        if not args.perf:   # its jobs' records are gone: a run does them again
            Journal().clear()
    return 0

# }}}


# {{{ convsolve explain / new-plugin / bench

def cmd_explain(args):
    problems = [cli_epilogue.structure(problem, args) for problem in (
        [Problem.from_key(args.key)] if args.key else parse_args(args.driver_flags).problems)]
    handle = Handle(profiling=True)   # explain times candidates
    if not args.no_run:
        check_device_limits(handle, *problems)   # before host tensors are made
    rng = np.random.default_rng(args.seed)
    reports = []
    for problem in problems:
        buffers = None if args.no_run else {
            **device_buffers(handle, random_tensors(problem, rng)),
            **cli_epilogue.epilogue_args(handle, problem, args, rng)[0]}
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
        print(f"convsolve {importlib.metadata.version('convsolve')}")
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
    add_conv_flags(conv)
    conv.set_defaults(func=cmd_conv)
    explain_parser = sub.add_parser("explain", help="what became of every solver for a problem",
                                    allow_abbrev=False)
    add_seed_and_json(explain_parser)
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
    for action, text in (("import", ("an export's records into the user dbs, keeping local "
                                     "records that are as fast or faster")),
                         ("merge", ("exports or user db files (SQLite) of other machines into "
                                    "the user dbs, one after the other, as import does"))):
        part = db_sub.add_parser(action, help=text)
        part.add_argument(*(["files"] if action == "merge" else ["file"]), nargs=(
            "+" if action == "merge" else None), metavar="FILE")
        part.add_argument("--force", action="store_true", help="also other devices' records")
        part.add_argument("--device", metavar="SPEC", help="this machine's device, as "
                          "CONVSOLVE_DEVICE names it (default: as the other commands choose)")
    db.set_defaults(func=cmd_db)
    bench_command.add_parser(sub).set_defaults(func=cmd_bench)
    add_tune_parser(sub)
    add_heuristics_parser(sub)
    add_worker_parser(sub)
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

