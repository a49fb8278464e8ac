#!/usr/bin/env python3
"""How long the learned ranking takes to predict every solver's time for one problem.

    .venv/bin/python scripts/bench_heuristics.py --solvers 17 --trees 150 --depth 6

Builds a RankingModel of --solvers ensembles (plus the scale's) of --trees complete trees of
--depth levels, every node split on a random feature at a threshold drawn from that feature's
values over a corpus of problems (so samples take varied paths; timing does not depend on what
the leaves hold), and times on --problems varied problems, each call --repeat times: the
features alone, the stacked trees alone, and the whole `predict_ms` for every solver, then the
batched form.  Prints the median per problem and exits 1 when predict_ms's median is over
--limit-ms (0.2 ms, issue 26's target).
"""
import argparse
import platform
import statistics
import sys
import time

import numpy as np
from convsolve import Problem
from convsolve.heuristics import (
    FEATURE_NAMES,
    DeviceFacts,
    Ensemble,
    Params,
    RankingModel,
    problem_features,
)

DEVICE = DeviceFacts(compute_units=132, vector_width=1, is_gpu=True, local_mem_bytes=49152,
                     max_work_group_size=1024, global_mem_bytes=140 << 30)


def corpus(count, seed):
    """``count`` varied problems (sizes, 1x1 to 7x7 filters, strides, the three directions)."""
    rng = np.random.default_rng(seed)
    found = []
    while len(found) < count:
        c, k = (int(v) for v in rng.choice([3, 16, 64, 256, 1024], 2))
        h, fil = int(rng.choice([7, 14, 28, 56, 112])), int(rng.choice([1, 3, 5, 7]))
        found.append(Problem.conv2d((int(rng.choice([1, 8, 64])), c, h, h), (k, c, fil, fil),
                                    int(rng.choice([1, 2])), fil // 2,
                                    direction=str(rng.choice(["fwd", "bwd", "wrw"]))))
    return found


def random_model(solvers, trees, depth, values, seed):
    """A model of random complete trees split at thresholds taken from ``values`` (rows of
    features)."""
    rng = np.random.default_rng(seed)
    inner = (1 << depth) - 1

    def ensemble():
        feature = rng.integers(0, len(FEATURE_NAMES), (trees, inner))
        threshold = values[rng.integers(0, len(values), (trees, inner)), feature]
        return Ensemble(0.0, feature, threshold, rng.normal(0, 0.1, (trees, inner + 1)))

    names = [f"family{i % 5}.Solver{i}" for i in range(solvers)]
    return RankingModel(DEVICE, Params(rounds=trees, depth=depth), ensemble(),
                        {name: ensemble() for name in names}), names


def median_us(call, repeat):
    """The median of ``repeat`` timings of ``call()``, in microseconds."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return 1e6 * statistics.median(samples)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--solvers", type=int, default=17)
    parser.add_argument("--trees", type=int, default=150)
    parser.add_argument("--depth", type=int, default=6)
    parser.add_argument("--problems", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--limit-ms", type=float, default=0.2)
    args = parser.parse_args()
    problems = corpus(args.problems, 1)
    rows = np.array([problem_features(p, DEVICE) for p in problems])
    model, names = random_model(args.solvers, args.trees, args.depth, rows, 2)
    model.predict_ms(problems[0], DEVICE, names)   # build the stacked arrays once
    figures = {
        "features": [median_us(lambda p=p: problem_features(p, DEVICE), args.repeat)
                     for p in problems],
        "trees": [median_us(lambda x=x: model.log_ms(x[None]), args.repeat) for x in rows],
        "predict_ms": [median_us(lambda p=p: model.predict_ms(p, DEVICE, names), args.repeat)
                       for p in problems],
    }
    batch = median_us(lambda: model.predict_batch(problems, DEVICE), 3) / len(problems)
    print(f"{args.solvers + 1} ensembles x {args.trees} trees of depth {args.depth}, "
          f"{len(problems)} problems, Python {platform.python_version()}, "
          f"numpy {np.__version__}, {platform.processor() or platform.machine()}")
    for what, times in figures.items():
        print(f"{what:<12} median {statistics.median(times):7.1f} us, "
              f"p95 {np.percentile(times, 95):7.1f} us a problem")
    print(f"{'batched':<12} {batch:7.1f} us a problem (predict_batch of all {len(problems)})")
    worst = statistics.median(figures["predict_ms"]) / 1e3
    print(f"predict_ms: {worst:.3f} ms, limit {args.limit_ms} ms: "
          f"{'OK' if worst <= args.limit_ms else 'OVER'}")
    return 0 if worst <= args.limit_ms else 1


if __name__ == "__main__":
    sys.exit(main())
