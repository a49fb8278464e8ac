#!/usr/bin/env python3
"""Backward-bias against a device copy of dy: is the reduction as fast as memory allows?

    .venv/bin/python scripts/bench_bias_grad.py --device 0 --batch 32 --repeat 20

For each dy shape (N = --batch, K x H x W from --shapes, ResNet-50's by default) it times
convsolve.backward_bias and a buffer-to-buffer cl.enqueue_copy of dy's bytes with profiling
events, interleaved, best of --repeat, and prints a Markdown table: both times, their ratio
(the target is at most 1.5), backward-bias's GB/s (dy's bytes read per second), the copy's
(bytes read and written per second), the error of db against a float64 sum, and whether every
run gave bitwise the same db.  Runs on any OpenCL device (--device: an index or a substring of
'platform: device', as CONVSOLVE_DEVICE; default: convsolve's choice); --config tries another
chunking than the device type's.
"""
import argparse
import platform
import sys

import convsolve
import numpy as np
import pyopencl as cl
from convsolve import reference
from convsolve.device.timing import elapsed_ms
from convsolve.engine import bias_grad

#: ResNet-50's output-channel planes (K, H, W), one per stage and the stem.
RESNET50 = "64x112x112,256x56x56,512x28x28,1024x14x14,2048x7x7"


def bench_shape(handle, shape, repeat):
    """A table row's numbers for dy of ``shape``: best backward-bias and copy ms, db's relative
    error against float64, and whether every run's db was bitwise the same."""
    host = np.random.default_rng(0).uniform(-1, 2, shape).astype(np.float32)
    flags = cl.mem_flags
    dy = cl.Buffer(handle.context, flags.READ_ONLY | flags.COPY_HOST_PTR, hostbuf=host)
    copy = cl.Buffer(handle.context, flags.READ_WRITE, dy.size)
    db = cl.Buffer(handle.context, flags.READ_WRITE, 4 * shape[1])
    scratch = handle.scratch(bias_grad.backward_bias_workspace(shape, handle), "bench")
    runs = {"bias": lambda: bias_grad.backward_bias(handle, shape, dy=dy, db=db, scratch=scratch),
            "copy": lambda: [cl.enqueue_copy(handle.queue, copy, dy)]}
    best, results = dict.fromkeys(runs, float("inf")), set()
    for index in range(repeat + 1):   # the first round warms up (builds, first touches)
        for name, run in runs.items():
            events = run()
            took = elapsed_ms(events)
            if index:
                best[name] = min(best[name], took)
        got = np.empty(shape[1], np.float32)
        cl.enqueue_copy(handle.queue, got, db)
        results.add(got.tobytes())
    error = reference.relative_error(got, reference.backward_bias(host))
    return best["bias"], best["copy"], error, len(results) == 1


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", help="OpenCL device: index or substring (default: "
                        "CONVSOLVE_DEVICE, else convsolve's choice)")
    parser.add_argument("--batch", type=int, default=32, help="N of every shape")
    parser.add_argument("--shapes", default=RESNET50, help="comma-separated KxHxW")
    parser.add_argument("--repeat", type=int, default=20, help="timed runs, the best kept")
    parser.add_argument("--config", metavar="G,I,S,V,A,STRIDED", help="try another "
                        "convsolve.engine.bias_grad.Config than the device type's (its fields in order)")
    args = parser.parse_args(argv)
    handle = convsolve.Handle(args.device, profiling=True)
    if args.config:
        *sizes, strided = map(int, args.config.split(","))
        config = bias_grad.Config(*sizes, strided=bool(strided))
        bias_grad.config_for = lambda _: config
    shapes = [(args.batch, *map(int, text.split("x"))) for text in args.shapes.split(",")]
    kind = "GPU" if handle.is_gpu else "CPU" if handle.is_cpu else "other"
    print(f"device: {handle.name} ({kind}, {handle.identity['compute_units']} CUs, driver "
          f"{handle.identity['driver']}); host "
          f"{platform.processor() or platform.machine()}; {bias_grad.config_for(handle)}; "
          f"best of {args.repeat}\n")
    print("| dy (N, K, H, W) | MB | backward-bias ms | copy ms | bias / copy | bias GB/s "
          "(read) | copy GB/s (read+write) | rel. error vs float64 | bitwise same |")
    print("| --- " * 9 + "|")
    for shape in shapes:
        bias_ms, copy_ms, error, same = bench_shape(handle, shape, args.repeat)
        nbytes = 4 * int(np.prod(shape))
        print(f"| {shape} | {nbytes / 1e6:.1f} | {bias_ms:.4f} | {copy_ms:.4f} | "
              f"{bias_ms / copy_ms:.2f} | {nbytes / bias_ms / 1e6:.1f} | "
              f"{2 * nbytes / copy_ms / 1e6:.1f} | {error:.1e} | {'yes' if same else 'NO'} |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
