"""`convsolve bench`: network layer suites timed with find's winner, beside PyTorch and the device peak."""
import datetime
import json
import os
import statistics
import sys
import time
from importlib import resources
from pathlib import Path

import numpy as np
import pyopencl as cl

from . import __version__, bench_overhead, bench_peak, bench_torch
from .errors import ConvsolveError, ValidationError
from .execute import run
from .find import find
from .handle import Handle
from .problem import Direction, Problem
from .timing import elapsed_ms

SUITES = resources.files("convsolve") / "suites"
#: Timed rounds per layer: at least MIN_ROUNDS, then more until --repeat or the time budget.
MIN_ROUNDS = 3
LAYER_FIELDS = ("name", "c", "h", "w", "k", "r", "s", "stride", "pad", "count")


# {{{ suites

def suite_names():
    """Names of the suites shipped in the package."""
    return sorted(p.name[:-5] for p in SUITES.iterdir() if p.name.endswith(".json"))


def load_suite(name):
    """A suite dict from a shipped name ('resnet50') or a path to a JSON file; checked."""
    path = Path(name) if name.endswith(".json") else SUITES / f"{name}.json"
    try:
        suite = json.loads(path.read_text())
    except FileNotFoundError:
        raise ValidationError("--suite", name, f"expected one of {suite_names()} or a .json "
                              "path") from None
    except ValueError as exc:
        raise ValidationError("--suite", name, f"not valid JSON: {exc}") from None
    for index, layer in enumerate(suite.get("layers", ())):
        missing = [f for f in LAYER_FIELDS if f not in layer]
        if missing:
            raise ValidationError(f"suite {name!r} layer {index}", layer, f"lacks {missing}")
    return suite


def layer_problem(layer, batch, direction):
    """The Problem of one suite entry at ``batch`` (None: the entry's own n) in ``direction``."""
    n = batch if batch is not None else layer.get("n", 8)
    return Problem.conv2d((n, layer["c"], layer["h"], layer["w"]),
                          (layer["k"], layer["c"] // layer.get("groups", 1), layer["r"], layer["s"]),
                          stride=tuple(layer["stride"]), padding=tuple(layer["pad"]),
                          dilation=tuple(layer.get("dilation", (1, 1))),
                          groups=layer.get("groups", 1), direction=direction)


def select_layers(layers, spec):
    """[(index, layer)] chosen by ``spec``: comma-separated indices, ranges 'a-b' or substrings
    of a layer's name or members; None or '' keeps every layer."""
    if not spec:
        return list(enumerate(layers))
    chosen = set()
    for token in (t.strip() for t in spec.split(",") if t.strip()):
        low, _, high = token.partition("-")
        if token.isdigit() or (low.isdigit() and high.isdigit()):
            first, last = int(low), int(high or low)
            chosen.update(i for i in range(first, last + 1) if i < len(layers))
        else:
            chosen.update(i for i, layer in enumerate(layers) if any(
                token in name for name in (layer["name"], *layer.get("members", ()))))
    if not chosen:
        raise ValidationError("--layers", spec, "selects no layer of the suite")
    return [(i, layers[i]) for i in sorted(chosen)]


def parse_directions(text):
    """[Direction] from 'fwd,bwd,wrw' (or 'all')."""
    if text.strip() == "all":
        return list(Direction)
    return [Direction.parse(t) for t in text.split(",") if t.strip()]

# }}}


# {{{ arithmetic

def gflops(flops, time_ms):
    """GFLOP/s of ``flops`` done in ``time_ms`` (None when there is no time)."""
    return flops / (time_ms * 1e6) if time_ms else None


def network_total(rows, peak_gflops=None):
    """Totals over ``rows`` weighting each layer by its count; ratio = torch time / our time."""
    def weighted(field):
        if any(row.get(field) is None for row in rows):
            return None
        return sum(row["count"] * row[field] for row in rows)
    flops = sum(row["count"] * row["flops"] for row in rows)
    total = {"layers": sum(row["count"] for row in rows), "distinct": len(rows), "flops": flops}
    for field in ("time_ms", "wall_ms", "torch_ms", "torch_default_ms"):
        total[field] = weighted(field)
    total["gflops"] = gflops(flops, total["time_ms"])
    total["peak_fraction"] = (total["gflops"] / peak_gflops
                              if total["gflops"] and peak_gflops else None)
    compare = total["wall_ms"] if rows and rows[0].get("compare_wall") else total["time_ms"]
    total["ratio"] = total["torch_ms"] / compare if total["torch_ms"] and compare else None
    return total

# }}}


# {{{ measuring

def _buffers(handle, problem, rng):
    """Device buffers of ``problem``'s x, w and y filled with uniform random floats."""
    flags = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
    return {name: cl.Buffer(handle.context, flags, hostbuf=rng.random(
        getattr(problem, name).size, dtype=np.float32)) for name in ("x", "w", "y")}


def bench_layer(handle, problem, peers, repeat, budget_ms, exhaustive, rng):
    """One row: find's winner, then ours and each torch peer sampled in alternating order."""
    bufs = _buffers(handle, problem, rng)
    begin = time.perf_counter()
    winner = find(handle, problem, **bufs, request_count=1, exhaustive=exhaustive)[0]
    row = {"solver": winner.solver, "find_ms": (time.perf_counter() - begin) * 1e3,
           "find_source": winner.source, "problem": problem.key(), "flops": problem.flops}
    for peer in peers:
        peer.setup(problem)
    samples = {"time_ms": [], "wall_ms": [], **{peer.label: [] for peer in peers}}

    def ours():
        start = time.perf_counter()
        events = run(handle, problem, winner.solver, **bufs)
        handle.queue.finish()
        samples["wall_ms"].append((time.perf_counter() - start) * 1e3)
        samples["time_ms"].append(elapsed_ms(events))

    sides = [ours] + [lambda peer=peer: samples[peer.label].append(peer.sample())
                      for peer in peers]
    for round_ in range(max(repeat, 1)):
        for side in (sides if round_ % 2 == 0 else sides[::-1]):
            side()
        if round_ + 1 >= min(MIN_ROUNDS, repeat) and sum(samples["wall_ms"]) >= budget_ms:
            break
    for name, values in samples.items():
        key = {"torch": "torch_ms", "torch-default": "torch_default_ms"}.get(name, name)
        row[key] = statistics.median(values)
    row["rounds"] = len(samples["time_ms"])
    for buffer in bufs.values():
        buffer.release()
    return row


class Progress:
    """A one-line progress bar on stderr, drawn only when stderr is a terminal."""

    def __init__(self, total, stream=sys.stderr):
        self.total, self.done, self.stream = total, 0, stream
        self.active = total > 0 and stream.isatty()

    def show(self, text):
        if self.active:
            filled = int(30 * self.done / self.total)
            self.stream.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {self.done}/{self.total}"
                              f" {text[:40]:<40}")
            self.stream.flush()

    def step(self):
        self.done += 1

    def close(self):
        if self.active:
            self.stream.write("\r" + " " * 80 + "\r")
            self.stream.flush()

# }}}


# {{{ output

def _shape(layer, problem):
    (ph, _), (pw, _) = problem.conv.pads
    group = f" g{problem.groups}" if problem.groups > 1 else ""
    return (f"n{problem.n} c{problem.c} {problem.in_h}x{problem.in_w} k{problem.k} "
            f"{problem.fil_h}x{problem.fil_w}/{problem.conv.strides[0]} p{ph}{group}")


def _fmt(value, digits=2):
    return "-" if value is None else f"{value:.{digits}f}"


def _table(rows, headers):
    widths = [max(len(str(v)) for v in column) for column in zip(headers, *rows)]
    return "\n".join("  ".join(str(v).ljust(w) if i in (1, 3, 5) else str(v).rjust(w)
                               for i, (v, w) in enumerate(zip(row, widths))).rstrip()
                     for row in (headers, *rows))


def format_report(report):
    """The human-readable tables of a bench report."""
    torch_note = report["torch"] or "not compared (--compare torch)"
    lines = [f"suite {report['suite']} ({report['source']})", f"device: {report['device']}",
             f"peak: {_fmt(report['peak']['gflops'], 1)} GFLOP/s FMA, "
             f"{_fmt(report['peak'].get('gbps'), 1)} GB/s copy ({report['peak']['how']})",
             f"torch: {torch_note}",
             "load average (1, 5, 15 min) at start and end: " + "; ".join(
                 " ".join(f"{v:.2f}" for v in load) for load in report["load"])]
    for result in report["results"]:
        lines.append(f"\n{Direction.parse(result['direction']).label}:")
        rows = [(r["index"], r["name"], r["count"], r["shape"], _fmt(r["flops"] / 1e9, 3),
                 r["solver"], _fmt(r["time_ms"], 3), _fmt(r["wall_ms"], 3),
                 _fmt(gflops(r["flops"], r["time_ms"]), 1),
                 _fmt(100 * r["peak_fraction"] if r["peak_fraction"] else None, 1),
                 _fmt(r.get("torch_ms"), 3), _fmt(r.get("torch_default_ms"), 3),
                 _fmt(r.get("ratio"), 3)) for r in result["rows"]]
        t = result["total"]
        rows.append(("", f"total ({t['layers']} layers)", t["layers"], "", _fmt(t["flops"] / 1e9, 3),
                     "", _fmt(t["time_ms"], 3), _fmt(t["wall_ms"], 3), _fmt(t["gflops"], 1),
                     _fmt(100 * t["peak_fraction"] if t["peak_fraction"] else None, 1),
                     _fmt(t["torch_ms"], 3), _fmt(t["torch_default_ms"], 3), _fmt(t["ratio"], 3)))
        lines.append(_table(rows, ("#", "layer", "count", "shape", "GFLOP", "solver", "ms",
                                   "wall ms", "GFLOP/s", "%peak", "torch ms", "torch-def ms",
                                   "speedup")))
    lines.append("\nms: OpenCL profiling events (median); speedup = torch ms / our "
                 f"{'wall' if report['compare_wall'] else 'event'} ms (> 1: convsolve faster); "
                 "totals weigh each layer by its count")
    return "\n".join(lines)


def plot(report, path):
    """Per-layer bars of GFLOP/s, convsolve beside torch, one panel per direction."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    results = report["results"]
    fig, axes = plt.subplots(len(results), 1, squeeze=False,
                             figsize=(max(8, 0.45 * max(len(r["rows"]) for r in results)),
                                      3.5 * len(results)))
    for ax, result in zip(axes[:, 0], results):
        names = [r["name"] for r in result["rows"]]
        ours = ("convsolve (wall)", "wall_ms") if report["compare_wall"] else ("convsolve", "time_ms")
        series = [ours, ("torch", "torch_ms"),
                  ("torch (default malloc)", "torch_default_ms")]
        series = [(label, key) for label, key in series
                  if all(r.get(key) for r in result["rows"])]
        x = np.arange(len(names))
        for i, (label, key) in enumerate(series):
            ax.bar(x + (i - (len(series) - 1) / 2) * 0.8 / len(series),
                   [gflops(r["flops"], r[key]) for r in result["rows"]], 0.8 / len(series),
                   label=label)
        ax.set_xticks(x, names, rotation=60, ha="right", fontsize=7)
        ax.set_ylabel("GFLOP/s")
        ax.set_title(f"{report['suite']} {Direction.parse(result['direction']).label}, "
                     f"{report['device']}", fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)

# }}}


def _need_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ConvsolveError("convsolve bench: --plot needs matplotlib, which is not installed; "
                             "pip install matplotlib (or convsolve[plot]), or leave --plot "
                             "off") from None


def cmd_bench(args):
    """Run the bench command described by the parsed ``args``; returns the exit status."""
    if args.plot:
        _need_matplotlib()
    suite = load_suite(args.suite)
    layers = select_layers(suite["layers"], args.layers)
    directions = parse_directions(args.directions)
    batch = args.batch
    if batch is None and not all("n" in layer for _, layer in layers):
        batch = suite.get("batch", 8)
    if args.overhead:
        return _cmd_overhead(args, suite, layers, directions, batch)
    handle = Handle()
    is_gpu = bool(handle.device.type & cl.device_type.GPU)
    if args.peak:
        peak = {"gflops": args.peak, "gbps": None, "how": "given with --peak"}
    else:
        peak = bench_peak.measure_peak(handle)
        peak["how"] = (f"measured: float{peak['fma']['PEAK_VW']} x {peak['fma']['PEAK_CHAINS']} "
                       f"chains, best of {bench_peak.SAMPLES}")
    peers, torch_note = [], None
    if args.compare == "torch":
        peers, torch_note = bench_torch.start_peers(is_gpu)
        if not peers:
            print(f"convsolve bench: no torch comparison: {torch_note}", file=sys.stderr)
            torch_note = f"not compared: {torch_note}"
    report = {"suite": suite["name"], "source": suite.get("source", args.suite),
              "device": handle.name, "is_gpu": is_gpu, "compare_wall": not is_gpu,
              "batch": batch, "peak": peak, "torch": torch_note, "load": [os.getloadavg()],
              "convsolve": __version__, "date": datetime.datetime.now().isoformat(timespec="seconds"),
              "options": {k: v for k, v in vars(args).items() if k not in ("func", "command")},
              "results": []}
    progress = Progress(len(layers) * len(directions))
    rng = np.random.default_rng(0)
    try:
        for direction in directions:
            rows = []
            for index, layer in layers:
                problem = layer_problem(layer, batch, direction)
                progress.show(f"{direction.value} {layer['name']}")
                row = bench_layer(handle, problem, peers, args.repeat, args.budget_ms,
                                  args.exhaustive, rng)
                row.update(index=index, name=layer["name"], count=layer["count"],
                           shape=_shape(layer, problem), compare_wall=not is_gpu)
                row["peak_fraction"] = (gflops(row["flops"], row["time_ms"]) / peak["gflops"]
                                        if peak["gflops"] else None)
                compare = row["wall_ms"] if not is_gpu else row["time_ms"]
                row["ratio"] = row["torch_ms"] / compare if row.get("torch_ms") else None
                rows.append(row)
                progress.step()
            report["results"].append({"direction": direction.value, "rows": rows,
                                      "total": network_total(rows, peak["gflops"])})
    finally:
        progress.close()
        report["load"].append(os.getloadavg())
        for peer in peers:
            peer.close()
    print(json.dumps(report, indent=1) if args.json else format_report(report))
    if args.plot:
        plot(report, args.plot)
    return 0


def _cmd_overhead(args, suite, layers, directions, batch):
    """--overhead: cold and warm find in fresh processes and run()'s per-call cost, per layer."""
    handle = Handle()
    progress = Progress(len(layers) * len(directions))
    rows = []
    try:
        for direction in directions:
            for index, layer in layers:
                problem = layer_problem(layer, batch, direction)
                progress.show(f"{direction.value} {layer['name']}")
                row = {"index": index, "name": layer["name"], "direction": direction.value,
                       "problem": problem.key(), **bench_overhead.find_overhead(problem.key())}
                small = layer_problem(layer, 1, direction)
                row["run"] = bench_overhead.run_overhead(handle, small, row["warm"]["solver"])
                rows.append(row)
                progress.step()
    finally:
        progress.close()
    if args.json:
        print(json.dumps({"suite": suite["name"], "device": handle.name, "batch": batch,
                          "rows": rows}, indent=1))
        return 0
    print(f"find overhead, suite {suite['name']}, device {handle.name}")
    table = [(r["index"], r["name"], r["direction"], r["warm"]["solver"],
              _fmt(r["cold"]["handle_ms"], 0), _fmt(r["cold"]["find_ms"], 1),
              _fmt(r["warm"]["handle_ms"], 0), _fmt(r["warm"]["find_ms"], 1),
              _fmt(r["warm"]["compile_ms"], 1), _fmt(r["warm"]["first_run_extra_ms"], 1),
              _fmt(r["run"]["enqueue_us"], 1), _fmt(r["run"]["overhead_us"], 1)) for r in rows]
    print(_table(table, ("#", "layer", "dir", "solver", "cold Handle ms", "cold find ms",
                         "warm Handle ms", "warm find ms", "warm compile ms",
                         "1st-run extra ms", "enqueue us", "run() extra us")))
    print("cold: empty kernel cache, find-db and PoCL cache (compile + benchmark); warm: a fresh "
          "process on the same caches (find-db hit, then compile from the kernel cache); "
          "1st-run extra: first run's wall time minus its kernel time; run() extra: host time of "
          "run() minus the bare invoker's enqueue, at batch 1 (median of "
          f"{bench_overhead.CALLS})")
    return 0


def add_parser(subparsers):
    """Register the ``bench`` subcommand on an argparse ``subparsers`` object."""
    parser = subparsers.add_parser(
        "bench", help="time network layer suites with find's winner, beside PyTorch",
        description=__doc__)
    flag = parser.add_argument
    flag("--suite", default="resnet50",
         help=f"a shipped suite ({', '.join(suite_names())}) or a .json path (resnet50)")
    flag("--batch", type=int, default=None,
         help="batch size (default: each entry's own n, else the suite's batch, 8)")
    flag("--directions", default="fwd", help="comma list of fwd, bwd, wrw, or all (fwd)")
    flag("--layers", default=None,
         help="comma list of layer indices, ranges a-b or name substrings (all)")
    flag("--compare", choices=("torch",), default=None,
         help="time PyTorch on the same convolutions (cuDNN on a GPU), interleaved with ours")
    flag("--repeat", type=int, default=5, help="timed rounds per layer at most (5)")
    flag("--budget-ms", type=float, default=2000.0,
         help="stop sampling a layer after this much of our time, once 3 rounds are done (2000)")
    flag("--exhaustive", action="store_true", help="benchmark every solver, ignoring the find-db")
    flag("--peak", type=float, default=None, help="use this GFLOP/s as the peak, not a measurement")
    flag("--overhead", action="store_true",
         help="measure find overhead (cold, warm in a fresh process) and run()'s cost instead")
    flag("--json", action="store_true", help="print the report as JSON")
    flag("--plot", metavar="FILE.png", help="draw per-layer GFLOP/s bars (needs matplotlib)")
    parser.set_defaults(func=cmd_bench)
    return parser
