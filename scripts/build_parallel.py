#!/usr/bin/env python3
"""How kernel builds scale on this device: threads of one process against processes.

Builds COUNT distinct configs of one tunable solver for one problem (cold: a fresh convsolve
binary cache, and set CUDA_CACHE_DISABLE=1 on NVIDIA), first with 1 thread, then with THREADS
threads in one process, then across PROCS processes, and prints builds per second for each:
what decides whether `convsolve tune` gains from compile workers in other processes. The
processes' line counts their start-up (imports, a context: 3-6 s each on NVIDIA), paid once per
worker; the "builds only" line counts from the first build's start to the last one's end.

    python3 scripts/build_parallel.py [--solver implicit_gemm.Fwd] [--count 32] [--threads 8]
        [--procs 8]
"""
import argparse
import multiprocessing
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor


def _configs(solver_name, count, offset):
    import convsolve
    from convsolve.solvers.calls import space_of
    from convsolve.solvers.registry import registry

    handle = convsolve.Handle()
    problem = convsolve.Problem.conv2d((32, 128, 28, 28), (128, 128, 3, 3), padding=1)
    solver = registry().get(solver_name)
    valid = space_of(solver, problem, handle).valid()
    return handle, solver, problem, valid[offset:offset + count]


def _build(handle, solver, problem, configs, threads):
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda c: handle.invoker(solver, problem, c), configs))


def _process(args):
    """(builds, when the first began, when the last ended) in a process of its own."""
    solver_name, count, offset = args
    os.environ["CONVSOLVE_CACHE_DIR"] = tempfile.mkdtemp()
    handle, solver, problem, configs = _configs(solver_name, count, offset)
    start = time.time()
    _build(handle, solver, problem, configs, 1)
    return len(configs), start, time.time()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--solver", default="implicit_gemm.Fwd")
    parser.add_argument("--count", type=int, default=32)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--procs", type=int, default=8)
    args = parser.parse_args()
    rows = []
    for label, threads, offset in (("1 thread", 1, 0), (f"{args.threads} threads", args.threads,
                                                          args.count)):
        os.environ["CONVSOLVE_CACHE_DIR"] = tempfile.mkdtemp()
        handle, solver, problem, configs = _configs(args.solver, args.count, offset)
        start = time.perf_counter()
        _build(handle, solver, problem, configs, threads)
        rows.append((label, len(configs), time.perf_counter() - start))
    per = args.count // args.procs
    jobs = [(args.solver, per, 2 * args.count + i * per) for i in range(args.procs)]
    start = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(args.procs) as pool:
        spans = pool.map(_process, jobs)
    built = sum(n for n, _, _ in spans)
    rows.append((f"{args.procs} processes (incl. start-up)", built, time.perf_counter() - start))
    rows.append((f"{args.procs} processes (builds only)", built,
                 max(end for _, _, end in spans) - min(begin for _, begin, _ in spans)))
    print(f"{args.solver}, device {handle.device.name.strip()}")
    for label, n, seconds in rows:
        print(f"  {label:32s} {n:4d} builds  {seconds:7.2f} s  {n / seconds:6.2f} builds/s")


if __name__ == "__main__":
    main()
