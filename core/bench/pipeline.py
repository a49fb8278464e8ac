"""`convsolve bench --pipeline`: a suite's layers enqueued back to back through plans, one finish.

A pass enqueues every layer of the suite ``count`` times, in the suite's order, through the
layer's execution plan (convsolve.plan of no solver, made after find ranked every layer, so each
runs find's pick) with no wait between calls, then finishes the queue once: the way a framework
runs a network's convolutions.  Of a pass it reports the wall time (first enqueue to the
finish's return) and the host time of the enqueue loop per call, both on the handle's plain
queue, as a program runs; and the sum of the calls' kernel times, from a pass of the same plans
on the handle's profiling queue (Handle.timing) after each sample.  A pass much longer than its
kernels is the device waiting for the host.  PyTorch runs the same sequence in a worker
(torch_peer): eager calls on the CPU, in NCHW and in channels_last; cuDNN on a GPU, then one
synchronize.  Each side's figure is the median pass of hot-loop samples (hot_loop.HotLoop:
passes back to back after a wake-up), the sides interleaved over --repeat rounds and the medians
of the rounds reported.  With ``--constant-weights`` (forward and backward-data) find ranks and
the plans run as for weights that never change (convsolve.plan's constant_weights): solvers that
pack their weights (Winograd's filter transform) do so once per buffer, before the passes.
"""
import datetime
import os
import statistics
import time
from importlib import metadata

import numpy as np
import pyopencl as cl

from ..device.handle import Handle
from ..device.tensors import device_buffers, random_tensors
from ..device.timing import elapsed_ms
from ..engine.find import find
from ..engine.plan import plan as make_plan
from ..errors import ConvsolveError, ValidationError
from . import hot_loop, torch_peer


def prepare(handle, problems, exhaustive, rng, progress, constant=False):
    """([(plan, timing plan, buffers)] one per call of a pass, [row] one per layer) for
    ``problems`` ([(index, suite entry, Problem)]): every problem found first (the find-db
    answers where it holds it), then planned with no solver on ``handle`` and on its timing
    twin, on random device buffers of its own, the timing plans run once; find and the plans
    told the weights are ``constant``."""
    staged = []
    for index, layer, problem in problems:
        progress.show(f"find {problem.direction.value} {layer['name']}")
        bufs = device_buffers(handle, random_tensors(problem, rng))
        solutions = find(handle, problem, **bufs, request_count=1, exhaustive=exhaustive,
                         constant_weights=constant)
        if not solutions:
            raise ConvsolveError(f"bench --pipeline: find returned no solution for "
                                 f"{problem.key()} (is CONVSOLVE_DEBUG_COMPILE_ONLY set?)")
        staged.append((index, layer, problem, bufs, solutions[0]))
        progress.step()
    sequence, rows = [], []
    for index, layer, problem, bufs, winner in staged:   # a find re-ranks: plans come after
        chosen = make_plan(handle, problem, constant_weights=constant)
        timed = make_plan(handle.timing, problem, constant_weights=constant)
        sequence += [(chosen, timed, bufs)] * layer["count"]
        rows.append({"index": index, "name": layer["name"], "count": layer["count"],
                     "problem": problem.key(), "solver": chosen.solver,
                     "find_solver": winner.solver, "find_source": winner.source})
    kernel_ms(handle, sequence)   # untimed: the timing plans' builds and weights packs first
    return sequence, rows


def one_pass(handle, sequence):
    """Host ms of the enqueue loop of one pass over ``sequence``."""
    begin = time.perf_counter()
    for chosen, _, bufs in sequence:
        chosen.run(**bufs)
    host_ms = (time.perf_counter() - begin) * 1e3
    handle.queue.finish()
    return host_ms


def kernel_ms(handle, sequence):
    """The sum of the kernel times of one pass over ``sequence`` through its timing plans."""
    with handle.timing_section():
        events = [timed.run(**bufs) for _, timed, bufs in sequence]
    return sum(elapsed_ms(e) for e in events)


def _side(sample, calls):
    """A side's figures from its rounds' samples ({'ms', 'host_ms', 'passes'[, 'kernel_ms']}),
    with each round's pass ms (their spread shows the load)."""
    def median(field):
        values = [s[field] for s in sample if s.get(field) is not None]
        return statistics.median(values) if values else None
    host_ms = median("host_ms")
    return {"pass_ms": median("ms"), "host_ms": host_ms, "kernel_ms": median("kernel_ms"),
            "host_us_per_call": host_ms * 1e3 / calls if host_ms is not None else None,
            "passes": sum(s["passes"] for s in sample), "round_ms": [s["ms"] for s in sample]}


def time_pipeline(handle, sequence, peers, rows, repeat, settle_s):
    """{'convsolve': figures, 'torch': {label: figures}} of ``repeat`` interleaved rounds, each
    side's sample after a pause of ``settle_s`` (the bench's SETTLE_S)."""
    loop = hot_loop.HotLoop(lambda: one_pass(handle, sequence))
    samples = {"convsolve": []}

    def ours():
        timed = loop.sample()
        samples["convsolve"].append({
            "ms": hot_loop.median_ms(timed), "passes": len(timed),
            "host_ms": statistics.median(host for _, host in timed),
            "kernel_ms": kernel_ms(handle, sequence)})
    sides = [ours]
    layers = [(row["problem"], row["count"]) for row in rows]
    for peer in peers:
        for layout in ("nchw", "channels_last") if peer.label == "torch" else ("nchw",):
            label = peer.label + ("" if layout == "nchw" else " channels_last")
            peer.setup_pipeline(label, layers, layout == "channels_last")
            samples[label] = []
            sides.append(lambda peer=peer, label=label:
                         samples[label].append(peer.sample_pipeline(label)))
    for round_ in range(max(repeat, 1)):
        for side in (sides if round_ % 2 == 0 else sides[::-1]):
            time.sleep(settle_s)
            side()
    calls = len(sequence)
    figures = {label: _side(sample, calls) for label, sample in samples.items()}
    return {"convsolve": figures.pop("convsolve"), "torch": figures}


def run_pipeline(args, suite, problems, batch, settle_s, progress):
    """The report of --pipeline on ``problems`` ({Direction: [(index, suite entry, Problem)]})
    of ``suite`` at ``batch``, as ``args`` say; ``progress`` a bench Progress."""
    for flag, value, why in (("--epilogue", args.epilogue, "its passes run plain convolutions"),
                             ("--plot", args.plot, "it has no per-layer times")):
        if value is not None:
            raise ValidationError(flag, value, f"is not taken with --pipeline: {why}")
    handle = Handle()
    peers, note = torch_peer.start_for(args.compare, handle.is_gpu)
    report = {"pipeline": True, "suite": suite["name"], "source": suite.get("source", args.suite),
              "device": handle.name, "is_gpu": handle.is_gpu, "batch": batch, "torch": note,
              "rounds": max(args.repeat, 1), "load": [os.getloadavg()],
              "constant_weights": args.constant_weights,
              "convsolve": metadata.version("convsolve"),
              "date": datetime.datetime.now().isoformat(timespec="seconds"), "results": []}
    rng = np.random.default_rng(0)
    try:
        for direction, staged in problems.items():
            sequence, rows = prepare(handle, staged, args.exhaustive, rng, progress,
                                     args.constant_weights)
            progress.show(f"passes {direction.value}")
            timed = time_pipeline(handle, sequence, peers, rows, args.repeat, settle_s)
            ours = timed["convsolve"]["pass_ms"]
            report["results"].append({
                "direction": direction.value, "calls": len(sequence), "distinct": len(rows),
                "plans": len({id(chosen) for chosen, _, _ in sequence}), "layers": rows, **timed,
                "ratio": {label: side["pass_ms"] / ours for label, side in timed["torch"].items()}})
            for buffer in {id(b): b for _, _, bufs in sequence for b in bufs.values()}.values():
                if isinstance(buffer, cl.Buffer):
                    buffer.release()
    finally:
        progress.close()
        report["load"].append(os.getloadavg())
        for peer in peers:
            peer.close()
    return report
