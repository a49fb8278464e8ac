#!/usr/bin/env python3
"""What constant weights buy: ResNet-50's 3x3 stride-1 layers at batch 1 through each Winograd
solver, the filter transformed per call against once (constant_weights=True), beside PyTorch's
CPU conv2d in a hot loop in a process of its own.

    .venv/bin/python scripts/constant_weights.py [--batch 1] [--repeat 50] [--torch PYTHON]

Each figure is the median wall time of one call through a plan (``plan.run`` on device
buffers, then ``queue.finish()``: host work, enqueue and kernels), after warm-up calls;
PyTorch's is the median of ``torch.nn.functional.conv2d`` calls in its own hot loop (no pause,
all cores), started first (before this process starts PoCL's threads) with the interpreter
``--torch`` names (one that has torch; none: left out).  The totals weigh each layer by how often ResNet-50 has it.
"""
import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

SUITE = Path(__file__).resolve().parents[1] / "core" / "bench" / "suites" / "resnet50.json"
SOLVERS = ("winograd.F2x3", "winograd.F4x3", "winograd.F6x3")


def layers():
    """The suite's 3x3 stride-1 layers."""
    suite = json.loads(SUITE.read_text())
    return [layer for layer in suite["layers"] if (layer["r"], layer["s"]) == (3, 3)
            and tuple(layer["stride"]) == (1, 1)]


def median_ms(call, repeat, warmup=3):
    for _ in range(warmup):
        call()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def convsolve_times(batch, repeat):
    """{layer name: {solver: (plain ms, constant-weights ms)}}."""
    import convsolve
    import numpy as np
    import pyopencl as cl
    handle = convsolve.Handle()
    rng = np.random.default_rng(0)
    result = {}
    for layer in layers():
        problem = convsolve.Problem.conv2d((batch, layer["c"], layer["h"], layer["w"]),
                                           (layer["k"], layer["c"], 3, 3), 1, tuple(layer["pad"]))
        flags = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
        x, w = (cl.Buffer(handle.context, flags, hostbuf=rng.standard_normal(
            getattr(problem, name).shape).astype(np.float32)) for name in "xw")
        y = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, problem.y.nbytes)
        result[layer["name"]] = {}
        for solver in SOLVERS:
            figures = []
            for constant in (False, True):
                plan = convsolve.plan(handle, problem, solver, constant_weights=constant)

                def call(plan=plan, x=x, w=w, y=y):
                    plan.run(x=x, w=w, y=y)
                    handle.queue.finish()
                figures.append(median_ms(call, repeat))
            result[layer["name"]][solver] = tuple(figures)
            print(f"{layer['name']:16} {solver:15} plain {figures[0]:8.3f} ms   "
                  f"constant weights {figures[1]:8.3f} ms", file=sys.stderr)
    return result


def torch_times(batch, repeat):
    """{layer name: ms} of torch's conv2d, in this process (run it alone)."""
    import torch
    torch.set_grad_enabled(False)
    result = {}
    for layer in layers():
        x = torch.randn(batch, layer["c"], layer["h"], layer["w"])
        w = torch.randn(layer["k"], layer["c"], 3, 3)
        pad = tuple(layer["pad"])
        result[layer["name"]] = median_ms(
            lambda x=x, w=w, pad=pad: torch.nn.functional.conv2d(x, w, padding=pad), repeat, 50)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--torch", metavar="PYTHON", help="an interpreter that has torch")
    parser.add_argument("--torch-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.torch_only:
        print(json.dumps(torch_times(args.batch, args.repeat)))
        return
    peer = {}
    if args.torch:   # first: this process's PoCL threads would still spin beside it after
        peer = json.loads(subprocess.run(
            [args.torch, __file__, "--torch-only", "--batch", str(args.batch), "--repeat",
             str(args.repeat)], check=True, capture_output=True, text=True).stdout)
    ours = convsolve_times(args.batch, args.repeat)
    counts = {layer["name"]: layer["count"] for layer in layers()}
    print(f"| layer (x count) | {' | '.join(f'{s} / cw' for s in SOLVERS)} | best / cw "
          "| torch | torch / best cw |")
    print("|" + " --- |" * (len(SOLVERS) + 4))
    totals = {"plain": 0.0, "cw": 0.0, "torch": 0.0}
    for name, by_solver in ours.items():
        best, best_cw = (min(f[i] for f in by_solver.values()) for i in (0, 1))
        totals["plain"] += counts[name] * best
        totals["cw"] += counts[name] * best_cw
        cells = " | ".join(f"{p:.3f} / {c:.3f}" for p, c in by_solver.values())
        torch_ms = peer.get(name)
        if torch_ms is not None:
            totals["torch"] += counts[name] * torch_ms
        ratio = f"{torch_ms / best_cw:.2f}x" if torch_ms else "-"
        torch_cell = f"{torch_ms:.3f}" if torch_ms else "-"
        print(f"| {name} (x{counts[name]}) | {cells} | {best:.3f} / {best_cw:.3f} | "
              f"{torch_cell} | {ratio} |")
    line = (f"total (weighted by count): best plain {totals['plain']:.3f} ms, best with "
            f"constant weights {totals['cw']:.3f} ms ({totals['plain'] / totals['cw']:.2f}x)")
    if peer:
        line += (f", torch {totals['torch']:.3f} ms (torch / ours with constant weights "
                 f"{totals['torch'] / totals['cw']:.2f}x)")
    print(line)


if __name__ == "__main__":
    main()
