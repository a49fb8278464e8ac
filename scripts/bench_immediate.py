#!/usr/bin/env python3
"""get_solutions on a find-db miss in a warm process: ms per call over ResNet-50's layers at a
batch no find has seen, with the learned ranking and with WTI (CONVSOLVE_HEURISTICS=0).  A first
pass over every problem warms what solvers cache per problem (fft.TiledFft's layout search,
2.6 ms a new problem on the 2-vCPU AVX2 EPYC, 2026-12-05), so both settings are timed warm.

    python3 scripts/bench_immediate.py [--batch N]     (an empty user find-db is used)
"""
import argparse
import os
import statistics
import tempfile
import time

parser = argparse.ArgumentParser()
parser.add_argument("--batch", type=int, default=7)
args = parser.parse_args()
os.environ["CONVSOLVE_USER_DB_PATH"] = os.path.join(tempfile.mkdtemp(), "find.sqlite")
import convsolve
from convsolve.bench.command import layer_problem, load_suite

handle = convsolve.Handle()
problems = [layer_problem(layer, args.batch, d) for layer in load_suite("resnet50")["layers"]
            for d in ("fwd", "bwd", "wrw")]
for problem in problems:   # warm: registry, model load, solvers' caches
    convsolve.get_solutions(handle, problem)
for setting in ("1", "0"):
    os.environ["CONVSOLVE_HEURISTICS"] = setting
    convsolve.get_solutions(handle, problems[0])
    times, sources = [], set()
    for problem in problems:
        begin = time.perf_counter()
        sources.add(convsolve.get_solutions(handle, problem)[0].source)
        times.append((time.perf_counter() - begin) * 1e3)
    print(f"{handle.name}: CONVSOLVE_HEURISTICS={setting}: get_solutions on a miss, median "
          f"{statistics.median(times):.3f} ms, max {max(times):.3f} ms over {len(problems)} "
          f"problems (sources {sorted(sources)})")
