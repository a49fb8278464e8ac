#!/usr/bin/env python3
"""What a fused epilogue costs: each layer of a suite timed bare, with bias + relu and with bias +
residual add + relu, fused and unfused (the core's pass), and backward-bias against a copy of dy.

    .venv/bin/python scripts/bench_epilogue.py --suite resnet50 --batch 8 --repeat 7

Per layer, the solver is the fastest solver find ranks for the bare problem among those that
fuse (have a ``fused_stages`` hook; ``--solver`` names them instead, layers none applies to
are left out); every variant runs ``--repeat`` times, interleaved, and the best time of each is
kept, so that a shared machine's noise hurts least.  ``--clock events`` (the default) times the
kernels with profiling events; ``--clock cpu`` takes the process's CPU time over each run (all of
PoCL's threads together, about the cores times the wall time when the machine is quiet), which
other tenants of a shared CPU disturb far less than wall time.  Prints a Markdown table
(BENCHMARKS.md's) and the totals.
"""
import argparse
import platform
import resource
import sys

import convsolve
import numpy as np
import pyopencl as cl
from convsolve.bench.command import layer_problem, load_suite
from convsolve.device.tensors import device_buffers, random_tensors
from convsolve.device.timing import elapsed_ms
from convsolve.engine import fusion
from convsolve.engine.search import tuned_invoker
from convsolve.epilogue import Epilogue, EpilogueArgs
from convsolve.solvers.calls import workspace_of

STRUCTURES = {"bias+relu": Epilogue(bias=True, activation="relu"),
              "bias+add+relu": Epilogue(bias=True, residual=True, activation="relu")}


def _cpu_ms():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return (usage.ru_utime + usage.ru_stime) * 1e3


def _best(handle, runs, repeat, clock="events"):
    """{name: best ms} of the callables in ``runs`` (each enqueues and returns events)."""
    best = {}
    for name, run in runs.items():   # warm-up
        cl.wait_for_events(run())
    for _ in range(repeat):
        for name, run in runs.items():
            start = _cpu_ms()
            events = run()
            cl.wait_for_events(events)
            took = elapsed_ms(events) if clock == "events" else _cpu_ms() - start
            best[name] = min(best.get(name, float("inf")), took)
    return best


def bench_layer(handle, layer, batch, repeat, solver_name, clock):
    bare = layer_problem(layer, batch, "fwd")
    host = random_tensors(bare, 0)
    buffers = convsolve.Buffers(**device_buffers(handle, host))
    registry = convsolve.registry()
    if solver_name is None:   # find's fastest solver that fuses
        ranked = convsolve.find(handle, bare, x=buffers.x, w=buffers.w, y=buffers.y)
        solver_name = next(s.solver for s in ranked if callable(getattr(
            registry.get(s.solver), "fused_stages", None)))
    else:   # the first of the comma-separated names that applies
        applicable = convsolve.applicable_solvers(bare)
        solver_name = next((name for name in solver_name.split(",") if name in applicable), None)
        if solver_name is None:
            return None, {}
    solver = registry.get(solver_name)
    flags = cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR
    bias = cl.Buffer(handle.context, flags, hostbuf=np.linspace(-1, 1, bare.k, dtype=np.float32))
    z = cl.Buffer(handle.context, flags, hostbuf=host["y"])
    size = {"bare": convsolve.solvers.calls.workspace_of(solver, bare)}
    runs = {"bare": (tuned_invoker(handle, solver, bare), buffers)}
    for label, structure in STRUCTURES.items():
        problem = bare.with_epilogue(structure)
        args = EpilogueArgs(bias=bias, z=z if structure.residual else None)
        for candidate in fusion.candidates(problem)[0]:
            if candidate.solver is solver:
                kind = "unfused" if candidate.name.endswith(fusion.UNFUSED) else "fused"
                key = f"{label} {kind}"
                runs[key] = (tuned_invoker(handle, candidate, problem), buffers.with_epilogue_args(args))
                size[key] = workspace_of(candidate, problem, handle)
    scratch = handle.scratch(max(size.values()) or 1)
    calls = {key: (lambda inv=inv, b=b: inv(b, scratch)) for key, (inv, b) in runs.items()}
    return solver_name, _best(handle, calls, repeat, clock)


def bench_bias(handle, shape, repeat, clock):
    """(backward-bias ms, copy of dy ms), best of ``repeat``."""
    dy = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, 4 * int(np.prod(shape)))
    cl.enqueue_fill_buffer(handle.queue, dy, np.float32(0.5), 0, dy.size)
    copy = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, dy.size)
    db = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, 4 * shape[1])
    best = _best(handle, {
        "bias": lambda: convsolve.backward_bias(handle, shape, dy=dy, db=db),
        "copy": lambda: [cl.enqueue_copy(handle.queue, copy, dy)]}, repeat, clock)
    return best["bias"], best["copy"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="resnet50")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--solver", help="solvers, comma-separated: each layer takes the first "
                        "that applies, and is left out when none does (default: find's fastest "
                        "solver with a fused_stages hook)")
    parser.add_argument("--layers", help="comma-separated layer names (default: all)")
    parser.add_argument("--clock", choices=("events", "cpu"), default="events",
                        help="kernel time from profiling events, or the process's CPU time")
    args = parser.parse_args(argv)
    handle = convsolve.Handle(profiling=True)
    suite = load_suite(args.suite)
    layers = [layer for layer in suite["layers"] if not args.layers
              or layer["name"] in args.layers.split(",")]
    print(f"device: {handle.name}; host {platform.processor() or platform.machine()}; "
          f"batch {args.batch}; best of {args.repeat}; clock: {args.clock}\n")
    heads = ["bare", "bias+relu fused", "bias+relu unfused", "bias+add+relu fused",
             "bias+add+relu unfused"]
    print("| layer | solver | bare ms | bias+relu fused | unfused | bias+add+relu fused | "
          "unfused | backward-bias ms | copy of dy ms |")
    print("| --- " * 9 + "|")
    totals = dict.fromkeys(heads, 0.0)
    for layer in layers:
        name, best = bench_layer(handle, layer, args.batch, args.repeat, args.solver, args.clock)
        if name is None:
            continue
        count = layer.get("count", 1)
        for head in heads:
            totals[head] += count * best.get(head, float("nan"))
        shape = layer_problem(layer, args.batch, "fwd").y.shape
        bias_ms, copy_ms = bench_bias(handle, shape, args.repeat, args.clock)
        cells = [f"{best['bare']:.3f}"] + [
            f"{best[h]:.3f} ({best[h] / best['bare'] - 1:+.1%})" if h in best else "-"
            for h in heads[1:]]
        print(f"| {layer['name']} | {name} | " + " | ".join(cells)
              + f" | {bias_ms:.3f} | {copy_ms:.3f} |", flush=True)
    print("\nnetwork totals (each layer times its count), ms: " + ", ".join(
        f"{h} {t:.1f} ({t / totals['bare'] - 1:+.1%})" for h, t in totals.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
