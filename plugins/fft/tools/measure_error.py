"""Relative RMS error of the FFT solvers against the float64 reference, per layer and direction:
the measurement behind `tolerance` (README: numerics). Inputs uniform in [-1, 1].

    .venv/bin/python plugins/fft/tools/measure_error.py --batch 2
"""
import argparse
import json
from pathlib import Path

import pyopencl as cl
from convsolve import Buffers, Direction, Handle, Problem
from convsolve.testing import (
    device_buffers,
    expected_output,
    random_tensors,
    read_output,
    relative_error,
)
from convsolve_fft import Fft2d, TiledFft

SUITE = Path(__file__).with_name("large_filters.json")


def error(handle, solver, problem, seed):
    host = random_tensors(problem, seed)
    buffers = device_buffers(handle, host)
    scratch = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, solver.workspace(problem))
    invoker = solver.build_invoker(problem, handle, solver.default_config(problem, handle))
    cl.wait_for_events(invoker(Buffers(**buffers), scratch))
    return relative_error(read_output(handle, problem, buffers), expected_output(problem, host))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--layers", default="")
    args = parser.parse_args()
    handle = Handle()
    print(f"device: {handle.name}")
    print("| layer | transform | fwd | bwd | wrw |")
    print("| --- | --- | --- | --- | --- |")
    worst = 0.0
    for layer in json.loads(SUITE.read_text())["layers"]:
        if args.layers and not any(t in layer["name"] for t in args.layers.split(",")):
            continue
        for solver in (Fft2d(), TiledFft()):
            cells, shape = [], "-"
            for direction in Direction:
                problem = Problem.conv2d(
                    (args.batch, layer["c"], layer["h"], layer["w"]),
                    (layer["k"], layer["c"], layer["r"], layer["s"]),
                    stride=tuple(layer["stride"]), padding=tuple(layer["pad"]),
                    direction=direction)
                if not solver.is_applicable(problem):
                    cells.append("-")
                    continue
                lay = solver.layout(problem)
                shape = f"{lay.h.length}x{lay.w.length}, {lay.h.tiles}x{lay.w.tiles} tiles"
                e = error(handle, solver, problem, 0)
                worst = max(worst, e)
                cells.append(f"{e:.2e}")
            print(f"| {layer['name']} n{args.batch} | {solver.name}: {shape} | "
                  + " | ".join(cells) + " |", flush=True)
    print(f"worst: {worst:.2e}")


if __name__ == "__main__":
    main()
