#!/usr/bin/env python3
"""Whether find ranks a Winograd solver above im2col + GEMM on ResNet-50's 3x3 stride-1 layers:
the speed claim README.md's "Performance" makes, measured (find in NORMAL mode, only the
winograd and gemm families on), one line per layer and direction.

    python3 plugins/winograd/tools/find_vs_gemm.py [--batch 4] [--directions fwd,bwd,wrw]

Exits 1 when gemm wins a layer.  CPU-shaped kernels: on a GPU im2col + GEMM is expected to win.
"""
import argparse
import os
import sys

from convsolve import Handle, Problem, find
from convsolve.testing import device_buffers, random_tensors

#: ResNet-50's distinct 3x3 stride-1 layers: (channels in = out, image side).
LAYERS = ((64, 56), (128, 28), (256, 14), (512, 7))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--directions", default="fwd,bwd,wrw")
    args = parser.parse_args(argv)
    for family in ("DIRECT", "FFT", "IMPLICIT_GEMM"):   # only winograd and gemm compete
        os.environ[f"CONVSOLVE_DEBUG_CONV_{family}"] = "0"
    handle, lost = Handle(), 0
    print(f"device: {handle.name}")
    for channels, side in LAYERS:
        for direction in args.directions.split(","):
            problem = Problem.conv2d((args.batch, channels, side, side),
                                     (channels, channels, 3, 3), padding=1, direction=direction)
            buffers = device_buffers(handle, random_tensors(problem))
            ranked = find(handle, problem, **buffers, mode="NORMAL")
            best = {}
            for solution in ranked:
                best.setdefault(solution.family, solution)
            wino, gemm = best.get("winograd"), best.get("gemm")
            won = wino is not None and (gemm is None or wino.time_ms <= gemm.time_ms)
            lost += not won
            print(f"{problem.key()}: " + ", ".join(f"{s.solver} {s.time_ms:.3f} ms"
                                                  for s in (wino, gemm) if s)
                  + ("" if won else "  <- gemm wins"))
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
