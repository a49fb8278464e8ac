#!/usr/bin/env python3
"""Where a pipelined pass's host time goes: `convsolve bench --pipeline`'s passes under cProfile.

    scripts/bench_gpu.sh exec python3 scripts/pipeline_profile.py --suite resnet50 --batch 1

Finds and plans every layer of the suite as the bench's pipeline does (bench.pipeline.prepare),
runs --warm passes, times --passes more (the enqueue loop of each, before its finish) and prints
the best and the median, then profiles --passes passes with cProfile and prints the --top
functions by their own time.  On a GPU the launches (pyopencl's enqueue, a C function) count
in the time of the Python function that calls them.
"""
import argparse
import cProfile
import pstats
import statistics

import numpy as np
from convsolve import Direction, Handle
from convsolve.bench.command import Progress, layer_problem, load_suite
from convsolve.bench.pipeline import one_pass, prepare


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="resnet50")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--direction", default="fwd", help="fwd, bwd or wrw")
    parser.add_argument("--warm", type=int, default=20, help="untimed passes first")
    parser.add_argument("--passes", type=int, default=30, help="timed passes, then profiled ones")
    parser.add_argument("--top", type=int, default=30, help="functions printed")
    args = parser.parse_args()
    handle, direction = Handle(), Direction.parse(args.direction)
    problems = [(i, layer, layer_problem(layer, args.batch, direction))
                for i, layer in enumerate(load_suite(args.suite)["layers"])]
    progress = Progress(len(problems))
    sequence, _ = prepare(handle, problems, False, np.random.default_rng(0), progress)
    progress.close()
    for _ in range(args.warm):
        one_pass(handle, sequence)
    hosts = [one_pass(handle, sequence) for _ in range(args.passes)]
    print(f"{handle.name}: {len(sequence)} calls a pass; enqueue loop {min(hosts):.3f} ms at "
          f"best, median {statistics.median(hosts):.3f} ms")
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(args.passes):
        one_pass(handle, sequence)
    profile.disable()
    pstats.Stats(profile).sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
