#!/usr/bin/env python3
"""Measure the Winograd solvers' relative RMS error against the float64 reference on the 3x3
stride-1 layers of ResNet-50 and VGG-16 (shared/data/networks_conv.json), every direction.

Two input distributions: uniform in [-1, 1] (what check_solver uses) and ReLU-like
activations (x, dy >= 0, uniform in [0, 1]; weights uniform in [-1, 1]).  Prints a Markdown table
of the worst error per solver, direction and distribution, and each layer's with -v.

    python3 plugins/winograd/tools/measure_error.py [--batch 1] [--nets resnet50,vgg16] [-v]
"""
import argparse
import json
from pathlib import Path

import numpy as np
import pyopencl as cl
from convsolve import Buffers, Direction, Handle, Problem, reference, registry
from convsolve.testing import device_buffers, read_output

ROOT = Path(__file__).resolve().parents[3]
DATA = next((p for p in (ROOT / "shared", ROOT.parent / "shared") if p.exists()),
            ROOT / "shared") / "data" / "networks_conv.json"
SOLVERS = ("winograd.F2x3", "winograd.F4x3", "winograd.F6x3")


def layers(nets, data):
    """(name, network, c, h, w, k) of every distinct 3x3 stride-1 layer of the networks."""
    found = json.loads(data.read_text())["layers"]
    for layer in found:
        if (layer["network"].split("_")[0] in nets and layer["r"] == layer["s"] == 3
                and layer["stride_h"] == layer["stride_w"] == 1 and layer["groups"] == 1):
            yield (layer["layers"][0], layer["network"], layer["c"], layer["h"], layer["w"],
                   layer["k"])


def tensors(problem, relu, rng):
    """Host tensors: uniform in [-1, 1], or with x and y uniform in [0, 1] (relu)."""
    low = 0.0 if relu else -1.0
    return {"x": rng.uniform(low, 1, problem.x.shape).astype(np.float32),
            "w": rng.uniform(-1, 1, problem.w.shape).astype(np.float32),
            "y": rng.uniform(low, 1, problem.y.shape).astype(np.float32)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--nets", default="resnet50,vgg16")
    parser.add_argument("--data", type=Path, default=DATA, help="networks_conv.json")
    parser.add_argument("-v", action="store_true", help="print every layer's errors")
    args = parser.parse_args()
    handle, rng = Handle(), np.random.default_rng(0)
    worst = {}
    for name, net, c, h, w, k in layers(args.nets.split(","), args.data):
        for direction in Direction:
            problem = Problem.conv2d((args.batch, c, h, w), (k, c, 3, 3), padding=1,
                                     direction=direction)
            for relu in (False, True):
                host = tensors(problem, relu, rng)
                expected = reference.compute(problem, **host)
                errors = []
                for solver_name in SOLVERS:
                    solver = registry().get(solver_name)
                    invoker = solver.build_invoker(problem, handle,
                                                   solver.default_config(problem, handle))
                    buffers = device_buffers(handle, host)
                    scratch = handle.scratch(solver.workspace(problem, handle))
                    cl.wait_for_events(invoker(Buffers(**buffers), scratch))
                    error = reference.relative_error(read_output(handle, problem, buffers),
                                                     expected)
                    key = (solver_name, direction.value, "relu" if relu else "uniform")
                    worst[key] = max(worst.get(key, (0.0, "")), (error, name))
                    errors.append(f"{error:.2e}")
                if args.v:
                    print(f"{net:14s} {name:16s} c{c:<4d} {h}x{w} k{k:<4d} {direction.value} "
                          f"{'relu   ' if relu else 'uniform'} " + " ".join(errors), flush=True)
    print("\n| solver | direction | uniform [-1, 1]: worst (layer) | ReLU-like: worst (layer) |")
    print("| --- | --- | --- | --- |")
    for solver_name in SOLVERS:
        for direction in Direction:
            cells = [f"{worst[solver_name, direction.value, kind][0]:.2e} "
                     f"({worst[solver_name, direction.value, kind][1]})"
                     for kind in ("uniform", "relu")]
            print(f"| {solver_name} | {direction.value} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
