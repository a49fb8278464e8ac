"""FFT against the best non-FFT solver, layer by layer: find (NORMAL mode: every solver timed)
repeated --rounds times, each solver's best time kept (the machine is shared and noisy).

    CONVSOLVE_DISABLE_SOLVERS=direct.NaiveFwd,direct.NaiveBwdData,direct.NaiveBwdWeights \
    .venv/bin/python plugins/fft/tools/compare.py --layers large --directions fwd,bwd,wrw
"""
import argparse
import json
import sys
from pathlib import Path

import convsolve
from convsolve import Direction, FindMode, Handle, Problem
from convsolve.testing import device_buffers, random_tensors

SUITE = Path(__file__).with_name("large_filters.json")


def problem(layer, direction, batch):
    n = batch or layer["n"]
    return Problem.conv2d((n, layer["c"], layer["h"], layer["w"]),
                          (layer["k"], layer["c"], layer["r"], layer["s"]),
                          stride=tuple(layer["stride"]), padding=tuple(layer["pad"]),
                          direction=direction)


def best_times(handle, p, rounds):
    """{solver: best time in ms} over ``rounds`` NORMAL finds."""
    buffers = device_buffers(handle, random_tensors(p, 0))
    best = {}
    for _ in range(rounds):
        for s in convsolve.find(handle, p, **buffers, mode=FindMode.NORMAL):
            best[s.solver] = min(best.get(s.solver, 1e30), s.time_ms)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default="", help="comma list of name substrings (all)")
    parser.add_argument("--directions", default="fwd")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=None)
    args = parser.parse_args()
    layers = json.loads(SUITE.read_text())["layers"]
    wanted = [t for t in args.layers.split(",") if t]
    handle = Handle()
    print(f"device: {handle.name}")
    print("| layer | dir | GFLOP | best FFT (ms) | best non-FFT (ms) | FFT speed-up |")
    print("| --- | --- | --- | --- | --- | --- |")
    for layer in layers:
        if wanted and not any(t in layer["name"] for t in wanted):
            continue
        for d in args.directions.split(","):
            p = problem(layer, Direction.parse(d), args.batch)
            times = best_times(handle, p, args.rounds)
            fft = min(((t, s) for s, t in times.items() if s.startswith("fft.")), default=None)
            other = min(((t, s) for s, t in times.items() if not s.startswith("fft.")),
                        default=None)
            ratio = f"{other[0] / fft[0]:.2f}x" if fft and other else "-"
            print(f"| {layer['name']} n{p.n} | {d} | {p.flops / 1e9:.2f} | "
                  f"{fft[0]:.2f} {fft[1]} | {other[0]:.2f} {other[1]} | {ratio} |"
                  if fft and other else f"| {layer['name']} | {d} | - | {fft} | {other} | - |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
