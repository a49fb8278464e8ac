"""`convsolve bench`: network layer suites timed with find's winner, beside PyTorch and the device peak."""
import datetime
import json
import os
import statistics
import sys
import time
from importlib import metadata, resources
from pathlib import Path

import numpy as np
import pyopencl as cl

from ..device.handle import Handle
from ..device.tensors import device_buffers, random_epilogue_tensors, random_tensors
from ..device.timing import elapsed_ms
from ..engine.find import find
from ..engine.immediate import get_solutions
from ..engine.plan import run
from ..epilogue import Epilogue
from ..errors import ConvsolveError, ValidationError
from ..problem import Direction, Problem
from . import first_pass, hot_loop, overhead, pipeline, torch_peer
from .peak import measure_peak
from .report import (
    format_overhead,
    format_pipeline,
    format_report,
    gflops,
    need_matplotlib,
    network_total,
    plot,
    shape,
)

SUITES = resources.files("convsolve.bench") / "suites"
#: Timed rounds per layer: at least MIN_ROUNDS, then more until --repeat or the time budget.
MIN_ROUNDS = 3
#: Pause before each sample: idle OpenMP (torch) and PoCL worker threads spin briefly after a
#: call before they sleep; on a 2-core machine they would slow whichever side runs next.  The
#: sample's hot loop wakes its own side's threads again before it times (hot_loop.WAKE_MS).
SETTLE_S = 0.005
LAYER_FIELDS = ("name", "c", "k", "stride", "pad", "count")
#: A layer's sizes: h, w, r and s for a 2-D layer, or "in" and "fil" lists of any spatial rank
#: (outermost first: [w], [h, w] or [d, h, w]); an optional "layout" names its tensors' (NHWC...).
SIZE_FIELDS = (("h", "w", "r", "s"), ("in", "fil"))


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
        sizes = min(([f for f in fields if f not in layer] for fields in SIZE_FIELDS), key=len)
        missing = [f for f in LAYER_FIELDS if f not in layer] + sizes
        if missing:
            raise ValidationError(f"suite {name!r} layer {index}", layer, f"lacks {missing}")
    return suite


def layer_problem(layer, batch, direction):
    """The Problem of one suite entry at ``batch`` (None: the entry's own n) in ``direction``."""
    n, groups = batch if batch is not None else layer.get("n", 8), layer.get("groups", 1)
    sizes, filters = ((layer["in"], layer["fil"]) if "in" in layer else
                      ((layer["h"], layer["w"]), (layer["r"], layer["s"])))
    return Problem.convolution((n, layer["c"], *sizes), (layer["k"], layer["c"] // groups, *filters),
                               stride=tuple(layer["stride"]), padding=tuple(layer["pad"]),
                               dilation=tuple(layer.get("dilation", (1,) * len(sizes))),
                               groups=groups, direction=direction, layout=layer.get("layout"))


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


# {{{ measuring

def parse_epilogue(text):
    """The Epilogue of --epilogue: an Epilogue key's parts after 'epi.' ('bias.relu',
    'bias.residual.relu'); None for None."""
    if text is None:
        return None
    try:
        return Epilogue.from_key("epi." + text.strip().removeprefix("epi."))
    except ValidationError:
        raise ValidationError("--epilogue", text, "expected an Epilogue key's parts, e.g. "
                              "bias.relu or bias.residual.relu (scale, bias, residual, an "
                              "activation, blend, in that order)") from None


def bench_layer(handle, problem, peers, repeat, budget_ms, exhaustive, rng):
    """One row: find's winner, then ours and each torch peer sampled in alternating order, each
    sample the median call of a hot loop (hot_loop.HotLoop), as a framework calls.
    A problem with an epilogue runs on random scale, bias and z (beta 1 with a blend)."""
    bufs = device_buffers(handle, random_tensors(problem, rng))
    bufs.update(device_buffers(handle, random_epilogue_tensors(problem, rng)))
    if problem.epilogue is not None and problem.epilogue.blend:
        bufs = {**bufs, "beta": 1.0}
    begin = time.perf_counter()
    solutions = find(handle, problem, **bufs, request_count=1, exhaustive=exhaustive)
    if not solutions:
        raise ConvsolveError(f"bench: find returned no solution for {problem.key()} (is "
                             "CONVSOLVE_DEBUG_COMPILE_ONLY set?)")
    winner = solutions[0]
    row = {"solver": winner.solver, "find_ms": (time.perf_counter() - begin) * 1e3,
           "find_source": winner.source, "problem": problem.key(), "flops": problem.flops}
    for peer in peers:
        row[f"{peer.label}_op"] = peer.setup(problem)["op"]
    samples = {"time_ms": [], "wall_ms": [], **{peer.label: [] for peer in peers}}

    def call():
        events = run(handle, problem, winner.solver, **bufs)
        handle.queue.finish()
        return events
    loop, spent_ms = hot_loop.HotLoop(call), []   # our time per sample, for the budget

    def ours():
        timed = loop.sample()
        samples["wall_ms"].append(hot_loop.median_ms(timed))
        samples["time_ms"].append(statistics.median(elapsed_ms(events) for _, events in timed))
        spent_ms.append(sum(ms for ms, _ in timed))

    sides = [ours] + [lambda peer=peer: samples[peer.label].append(peer.sample())
                      for peer in peers]
    for round_ in range(max(repeat, 1)):
        for side in (sides if round_ % 2 == 0 else sides[::-1]):
            time.sleep(SETTLE_S)
            side()
        if round_ + 1 >= min(MIN_ROUNDS, repeat) and sum(spent_ms) >= budget_ms:
            break
    for name, values in samples.items():
        key = {"torch": "torch_ms", "torch-default": "torch_default_ms"}.get(name, name)
        row[key] = statistics.median(values)
    row["rounds"] = len(samples["time_ms"])
    for buffer in bufs.values():
        if isinstance(buffer, cl.Buffer):
            buffer.release()
    return row


class Progress:
    """A one-line progress bar on stderr, drawn only when stderr is a terminal."""

    def __init__(self, total, stream=None):
        self.total, self.done, self.stream = total, 0, stream or sys.stderr
        self.active = total > 0 and self.stream.isatty()

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


def _peak(handle, given):
    """The peak record: measured with peak.cl, or the --peak figure."""
    if given:
        return {"gflops": given, "gbps": None, "how": "given with --peak"}
    return measure_peak(handle)


def run_suite(args, suite, layers, directions, batch):
    """The report of timing ``layers`` of ``suite`` in each direction, as ``args`` say."""
    epilogue = parse_epilogue(args.epilogue)
    for direction in directions:   # refused before any timing: backward takes alpha and blend
        if epilogue is not None:
            epilogue.check(direction)
    handle = Handle(profiling=True)   # the rows' kernel times are the runs' events
    is_gpu = handle.is_gpu
    peak = _peak(handle, args.peak)
    peers, torch_note = torch_peer.start_for(args.compare, is_gpu)
    report = {"suite": suite["name"], "source": suite.get("source", args.suite),
              "device": handle.name, "is_gpu": is_gpu, "compare_wall": not is_gpu,
              "batch": batch, "peak": peak, "torch": torch_note, "load": [os.getloadavg()],
              "convsolve": metadata.version("convsolve"), "date": datetime.datetime.now().isoformat(timespec="seconds"),
              "options": {k: v for k, v in vars(args).items() if k not in ("func", "command")},
              "results": []}
    progress = Progress(len(layers) * len(directions))
    rng = np.random.default_rng(0)
    try:
        for direction in directions:
            rows = []
            for index, layer in layers:
                problem = layer_problem(layer, batch, direction).with_epilogue(epilogue)
                progress.show(f"{direction.value} {layer['name']}")
                row = bench_layer(handle, problem, peers, args.repeat, args.budget_ms,
                                  args.exhaustive, rng)
                row.update(index=index, name=layer["name"], count=layer["count"],
                           shape=shape(problem), compare_wall=not is_gpu)
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
    return report


def run_overhead(suite, layers, directions, batch):
    """The report of --overhead: cold and warm find in fresh processes, run()'s per-call cost."""
    handle = Handle()
    progress = Progress(len(layers) * len(directions))
    rows = []
    try:
        for direction in directions:
            for index, layer in layers:
                problem = layer_problem(layer, batch, direction)
                progress.show(f"{direction.value} {layer['name']}")
                row = {"index": index, "name": layer["name"], "direction": direction.value,
                       "problem": problem.key(), **overhead.find_overhead(problem.key())}
                small = layer_problem(layer, 1, direction)
                try:
                    row["run"] = overhead.run_overhead(handle, small, row["warm"]["solver"])
                except ConvsolveError as exc:  # e.g. a plugin installed while the bench ran
                    row["run"] = {"error": str(exc), "run_us": None, "enqueue_us": None,
                                  "overhead_us": None}
                rows.append(row)
                progress.step()
    finally:
        progress.close()
    hot = {}
    for direction in directions:  # run()'s cost in a hot loop: a tiny problem, many calls
        tiny = Problem.conv2d((1, 4, 8, 8), (8, 4, 3, 3), padding=1, direction=direction)
        solver = get_solutions(handle, tiny, 1)[0].solver
        hot[direction.value] = {
            **overhead.run_overhead(handle, tiny, solver, calls=300, block=overhead.BLOCK),
            "one_at_a_time": overhead.run_overhead(handle, tiny, solver, calls=300),
            **overhead.db_hit_us(handle, tiny)}
    keys = list(dict.fromkeys(row["problem"] for row in rows))
    return {"suite": suite["name"], "device": handle.name, "batch": batch, "rows": rows,
            "suite_finds": overhead.suite_finds(keys) if len(keys) > 1 else None,
            "calls": overhead.CALLS, "block": overhead.BLOCK, "hot": hot,
            "date": datetime.datetime.now().isoformat(timespec="seconds")}


def run_first_pass(args, suite, layers, directions, batch):
    """The report of --first-pass: the forward pass at ``batch`` on an unseen batch, per mode."""
    if directions != [Direction.FORWARD]:
        raise ValidationError("--directions", args.directions, "--first-pass times the numpy "
                              "API's forward conv2d: fwd only")
    batch = batch if batch is not None else suite.get("batch", 8)
    prime_batch = args.prime_batch if args.prime_batch is not None else batch + 1
    if batch < 1 or prime_batch < 1 or prime_batch == batch:
        raise ValidationError("--prime-batch", prime_batch, f"must be a batch of 1 or more other "
                              f"than --batch {batch} (at least 1): the pass's batch is unseen")

    def at(n):
        return [{"name": layer["name"], "count": layer["count"],
                 "problem": layer_problem(layer, n, Direction.FORWARD).key()} for _, layer in layers]
    report = first_pass.measure(at(batch), at(prime_batch), first_pass.parse_modes(args.modes),
                                args.repeat)
    return {"kind": "first-pass", "suite": suite["name"], "batch": batch,
            "prime_batch": prime_batch, "passes": args.repeat,
            "layers_total": sum(layer["count"] for _, layer in layers),
            "date": datetime.datetime.now().isoformat(timespec="seconds"), **report}


def cmd_bench(args):
    """Run the bench command described by the parsed ``args``; returns the exit status."""
    if args.plot:
        need_matplotlib()
    if args.render:
        try:
            report = json.loads(Path(args.render).read_text())
        except (OSError, ValueError) as exc:
            raise ValidationError("--render", args.render, f"not a readable report: {exc}") from None
    else:
        suite = load_suite(args.suite)
        layers = select_layers(suite["layers"], args.layers)
        directions = parse_directions(args.directions)
        batch = args.batch
        if batch is None and not all("n" in layer for _, layer in layers):
            batch = suite.get("batch", 8)
        if args.constant_weights and (not args.pipeline or Direction.BACKWARD_WEIGHTS in directions):
            raise ValidationError("--constant-weights", True, "takes --pipeline, forward or "
                                  "backward-data: backward-weights writes the weights")
        if args.first_pass:
            report = run_first_pass(args, suite, layers, directions, batch)
        elif args.pipeline:
            problems = {d: [(i, layer, layer_problem(layer, batch, d)) for i, layer in layers]
                        for d in directions}
            report = pipeline.run_pipeline(args, suite, problems, batch, SETTLE_S,
                                           Progress(len(layers) * len(directions)))
        elif args.overhead:
            report = run_overhead(suite, layers, directions, batch)
        else:
            report = run_suite(args, suite, layers, directions, batch)
    if args.json:
        print(json.dumps(report, indent=1))
    elif report.get("kind") == "first-pass":
        print(first_pass.format_first_pass(report, args.markdown))
    elif report.get("pipeline"):
        print(format_pipeline(report, args.markdown))
    elif "calls" in report:
        print(format_overhead(report, args.markdown))
    else:
        print(format_report(report, args.markdown))
    if args.plot and "results" in report:
        plot(report, args.plot)
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
    flag("--epilogue", metavar="PARTS", default=None,
         help="time each convolution with this epilogue, an Epilogue key's parts (bias.relu, "
              "bias.residual.relu); torch runs the same ops: on a GPU cuDNN's fused "
              "conv+bias(+add)+relu where it has one, else eager in-place calls")
    flag("--repeat", type=int, default=5, help="timed rounds per layer at most (5)")
    flag("--budget-ms", type=float, default=2000.0,
         help=f"stop sampling a layer after this much of our time, once {MIN_ROUNDS} rounds "
              "are done (2000)")
    flag("--exhaustive", action="store_true", help="benchmark every solver, ignoring the find-db")
    flag("--peak", type=float, default=None, help="use this GFLOP/s as the peak, not a measurement")
    flag("--overhead", action="store_true",
         help="measure find overhead (cold, warm in a fresh process) and run()'s cost instead")
    flag("--first-pass", action="store_true",
         help="time the forward pass through the numpy API at a batch the find-db has never "
              "seen, in fresh processes per find mode (warm and cold kernel cache), against "
              "its steady state; --repeat steady passes")
    flag("--modes", default=f"{first_pass.DEFAULT},FAST,DYNAMIC_HYBRID",
         help="--first-pass: comma list of find modes, 'default' being the numpy API's own "
              "(default,FAST,DYNAMIC_HYBRID)")
    flag("--prime-batch", type=int, default=None,
         help="--first-pass: the batch the priming process warms the kernel caches at "
              "(--batch + 1)")
    flag("--pipeline", action="store_true",
         help="time passes of the suite's layers (each count times) enqueued back to back "
              "through plans, one finish a pass, against torch doing the same (--repeat rounds)")
    flag("--constant-weights", action="store_true", help="--pipeline: weights that never "
         "change (inference): find and the plans take constant_weights (Winograd packs once)")
    flag("--json", action="store_true", help="print the report as JSON")
    flag("--markdown", action="store_true", help="print Markdown tables")
    flag("--render", metavar="REPORT.json", help="print (or plot) a report saved with --json")
    flag("--plot", metavar="FILE.png", help="draw per-layer GFLOP/s bars (needs matplotlib)")
    parser.set_defaults(func=cmd_bench)
    return parser

