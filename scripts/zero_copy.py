#!/usr/bin/env python3
"""Zero-copy against copying: the numpy API's forward call per layer of a bench suite, with host
arrays wrapped (CONVSOLVE_ZERO_COPY=1, also with a kept out= array) and copied (=0);
scripts/torch_resnet50.py prints the same table.

The three ways alternate within each round, so that load on the machine reaches them alike;
each layer's plan is made first and settles on one solver (find in FAST mode unless --find-mode
says otherwise): the same solver serves every way, so only the transfers differ.  Prints a Markdown table: per layer the
median call time of each way and copy / wrap, then the totals weighted by each layer's count.

    .venv/bin/python scripts/zero_copy.py --suite resnet50 --batch 8 --repeat 5 [--layers 0-3]
"""
import argparse
import os
import statistics
import sys
import time

import convsolve
import numpy as np
from convsolve.bench.command import layer_problem, load_suite, select_layers
from convsolve.device.tensors import aligned_empty, wraps
from convsolve.engine.trials import TRIAL_CALLS

WAYS = ("copy", "wrap", "wrap+out")
#: Calls after which a shape's plan runs one solver: on a find-db miss the numpy API's online
#: plan (HYBRID, DYNAMIC_HYBRID) times up to 3 candidates TRIAL_CALLS times each on its next
#: calls, then keeps the fastest.
SETTLE_CALLS = 3 * TRIAL_CALLS + 1


def _time(call, repeat):
    """Median seconds of ``repeat`` calls."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(handle, layer, problem, repeat, rng):
    """{way: median seconds} of conv2d on ``problem`` (of the suite's ``layer``), the ways
    interleaved."""
    x = aligned_empty(problem.x.shape)
    w = aligned_empty(problem.w.shape)
    x[...] = rng.uniform(-1, 1, x.shape)
    w[...] = rng.uniform(-1, 1, w.shape)
    out = aligned_empty(problem.y.shape)
    kw = {"stride": tuple(layer["stride"]), "padding": tuple(layer["pad"]),
          "dilation": tuple(layer.get("dilation", (1, 1))), "groups": layer.get("groups", 1),
          "handle": handle}
    calls = {"copy": lambda: convsolve.conv2d(x, w, **kw),
             "wrap": lambda: convsolve.conv2d(x, w, **kw),
             "wrap+out": lambda: convsolve.conv2d(x, w, out=out, **kw)}
    for _ in range(SETTLE_CALLS):   # the plan is made and settles on one solver
        reference = convsolve.conv2d(x, w, **kw)
    samples = {way: [] for way in WAYS}
    for _ in range(repeat):
        for way in WAYS:
            os.environ["CONVSOLVE_ZERO_COPY"] = "0" if way == "copy" else "1"
            samples[way].append(_time(calls[way], 1))
    os.environ["CONVSOLVE_ZERO_COPY"] = "1"
    assert np.array_equal(calls["wrap+out"](), reference), "zero-copy changed the result"
    return {way: statistics.median(times) for way, times in samples.items()}


def table(handle, layers, batch, repeat, rng):
    """Markdown lines: per layer of ``layers`` ([(index, suite layer)]) at ``batch``, the
    megabytes moved, each way's median ms and copy / wrap; then the totals weighted by count."""
    yield "| layer | MB in+out | " + " | ".join(f"{way} ms" for way in WAYS) + " | copy / wrap |"
    yield "| --- " * (len(WAYS) + 3) + "|"
    totals = dict.fromkeys(WAYS, 0.0)
    for _, layer in layers:
        problem = layer_problem(layer, batch, convsolve.Direction.FORWARD)
        times = measure(handle, layer, problem, repeat, rng)
        megabytes = (problem.x.nbytes + problem.w.nbytes + problem.y.nbytes) / 1e6
        for way in WAYS:
            totals[way] += times[way] * layer.get("count", 1)
        yield (f"| {layer['name']} x{layer.get('count', 1)} | {megabytes:.1f} | "
               + " | ".join(f"{times[way] * 1e3:.3f}" for way in WAYS)
               + f" | {times['copy'] / times['wrap']:.2f} |")
    yield ("| network (x count) | | " + " | ".join(f"{totals[way] * 1e3:.2f}" for way in WAYS)
           + f" | {totals['copy'] / totals['wrap']:.2f} |")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="resnet50")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--layers", default=None, help="as bench --layers: 0,3-5,conv1")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--find-mode", default="FAST")
    args = parser.parse_args(argv)
    os.environ["CONVSOLVE_FIND_MODE"] = args.find_mode
    suite = load_suite(args.suite)
    layers = select_layers(suite["layers"], args.layers)
    handle, rng = convsolve.default_handle(), np.random.default_rng(0)
    probe = aligned_empty((16,))
    print(f"{handle.name}: host-unified memory {bool(handle.device.host_unified_memory)}, "
          f"wraps aligned arrays: {wraps(handle, probe)}; batch {args.batch}, "
          f"median of {args.repeat}\n")
    for line in table(handle, layers, args.batch, args.repeat, rng):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
