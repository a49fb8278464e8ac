#!/usr/bin/env python3
"""Compare the tuner's strategies on a few layers: random-local within a small budget against
exhaustive search (or a large random-local budget where the space is too big), one solver each.

    python3 scripts/search_strategies.py --suite resnet50 --batch 32 --layers 3,6,12 \
        --solver gemm.Im2ColGemm --small 24 --large 400 --large-s 240

For each layer and direction: the default config's time, the best found by each strategy, the
configs each timed and its wall seconds. Both searches run on the same handle, tensors and
program cache; their trials go to a throwaway perf-db.
"""
import argparse
import json
import os
import tempfile
import time

os.environ.setdefault("CONVSOLVE_PERF_DB_PATH", tempfile.mktemp(suffix=".sqlite"))

import convsolve
from convsolve.bench.command import layer_problem, load_suite, parse_directions, select_layers
from convsolve.device.tensors import device_buffers, random_tensors
from convsolve.engine.search import Budget, search
from convsolve.solvers.calls import workspace_of


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="resnet50")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--layers", default="3,6")
    parser.add_argument("--directions", default="fwd")
    parser.add_argument("--solver", default="gemm.Im2ColGemm")
    parser.add_argument("--small", type=int, default=24, help="random-local's config budget")
    parser.add_argument("--large", type=int, default=400, help="the reference search's budget")
    parser.add_argument("--large-s", type=float, default=240.0)
    args = parser.parse_args()
    handle = convsolve.Handle()
    solver = convsolve.registry().get(args.solver)
    rows = []
    for index, layer in select_layers(load_suite(args.suite)["layers"], args.layers):
        for direction in parse_directions(args.directions):
            problem = layer_problem(layer, args.batch, direction)
            if not solver.is_applicable(problem) or direction not in solver.directions:
                continue
            buffers = convsolve.Buffers(**device_buffers(handle, random_tensors(problem, 0)))
            scratch = handle.scratch(workspace_of(solver, problem, handle))
            space = solver.config_space(problem, handle)
            valid = sum(1 for _ in space) if space.size() < 200000 else None
            row = {"layer": f"{index}:{layer['name']}", "direction": direction.value,
                   "space": valid}
            for label, budget, strategy in (
                    ("small", Budget(args.small, None, None), "random-local"),
                    ("large", Budget(args.large, args.large_s, None),
                     "exhaustive" if valid and valid <= args.large else "random-local")):
                start = time.monotonic()
                outcome = search(handle, problem, solver, buffers, scratch, budget, strategy,
                                 seed=1)
                row[label] = {"strategy": strategy, "best_ms": outcome.best.time_ms,
                              "default_ms": outcome.default.time_ms,
                              "configs": len(outcome.trials),
                              "seconds": round(time.monotonic() - start, 1),
                              "best": outcome.best.config}
            rows.append(row)
            print(json.dumps(row), flush=True)
    print(f"device: {handle.name}")
    print("| layer | dir | valid configs | default ms | random-local (configs) best ms | "
          "reference (strategy, configs) best ms | small / reference |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        s, big = r["small"], r["large"]
        print(f"| {r['layer']} | {r['direction']} | {r['space']} | {s['default_ms']:.4f} | "
              f"{s['best_ms']:.4f} ({s['configs']}, {s['seconds']} s) | {big['best_ms']:.4f} "
              f"({big['strategy']}, {big['configs']}, {big['seconds']} s) | "
              f"{s['best_ms'] / big['best_ms']:.3f} |")


if __name__ == "__main__":
    main()
