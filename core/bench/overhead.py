"""Find overhead for `convsolve bench --overhead`: cold and warm find in fresh processes, run()'s cost.

Cold find runs in a child process whose kernel cache, user find-db, system find-db and the
driver's own kernel cache (PoCL's, NVIDIA's) are empty temporary paths: it compiles and
benchmarks every candidate.  Warm find runs in a second fresh process on the same paths: a
find-db hit, then building the winner from the kernel cache.  A framework starting up finds
every layer of its network in one process: the suite's finds, cold and then warm in two more
fresh processes, show the first find (which discovers the plugins) apart from the others.  The
per-call overhead of ``run`` and of ``plan.run`` is measured in the bench's own process, as
their host time minus host time of calling the solver's invoker directly (set arguments +
enqueue), each timed while a user event holds the queue so the kernel cannot start during the
call; so is a repeated find and get_solutions on a find-db hit.  The hot loop on a tiny problem
times calls one at a time (the queue drained after each) and BLOCK a hold, as frameworks enqueue.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyopencl as cl

from ..device.handle import Handle
from ..device.tensors import device_buffers, random_tensors
from ..device.timing import elapsed_ms
from ..engine.find import find
from ..engine.immediate import compile_solution, get_solutions
from ..engine.plan import plan, run
from ..engine.run import resolve_solver
from ..hookspecs import Buffers
from ..problem import Problem

#: Calls of run() and of the bare invoker timed for the per-call overhead (alternating): at
#: most CALLS, at least MIN_CALLS.
CALLS = 50
MIN_CALLS = 5
#: Calls enqueued back to back while one user event holds the queue (the hot loop's figures).
BLOCK = 20


def child_env(directory):
    """os.environ with every cache and db of convsolve and of the driver under ``directory``."""
    environ = dict(os.environ)
    environ.update({"CONVSOLVE_CACHE_DIR": str(directory / "cache"),
                    "CONVSOLVE_USER_DB_PATH": str(directory / "find_db.sqlite"),
                    "CONVSOLVE_SYSTEM_DB_PATH": str(directory / "no_system_db.jsonl"),
                    "POCL_CACHE_DIR": str(directory / "pocl"),
                    "CUDA_CACHE_PATH": str(directory / "nv")})
    environ.pop("CONVSOLVE_DISABLE_CACHE", None)
    return environ


def _child(args, directory):
    """The JSON report of one fresh process running this module with ``args``: a problem key
    (find, compile and run it: _measure), or ``--finds`` and keys (find each: _measure_finds)."""
    begin = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "convsolve.bench.overhead", *args],
                         env=child_env(directory), capture_output=True, text=True,
                         timeout=3600, check=False)
    if out.returncode:
        raise RuntimeError(f"find-overhead child for {' '.join(args)} failed: "
                           f"{out.stderr.strip()[-2000:]}")
    report = json.loads(out.stdout.strip().splitlines()[-1])
    report["process_ms"] = (time.perf_counter() - begin) * 1e3
    return report


def find_overhead(key):
    """{'cold': report, 'warm': report} for the problem ``key``, each from a fresh process."""
    with tempfile.TemporaryDirectory(prefix="convsolve-bench-") as tmp:
        cold = _child([key], Path(tmp))
        warm = _child([key], Path(tmp))
    return {"cold": cold, "warm": warm}


def suite_finds(keys):
    """{'cold': [ms], 'warm': [ms]}: each find's time, in ``keys``' order, of one fresh process
    finding every problem of ``keys`` on empty caches, then of another on the caches the first
    filled."""
    with tempfile.TemporaryDirectory(prefix="convsolve-bench-") as tmp:
        return {state: _child(["--finds", *keys], Path(tmp))["find_ms"]
                for state in ("cold", "warm")}


def _gated(handle, call, block=1):
    """Host seconds per call of ``block`` calls of ``call()`` made back to back while the queue
    is held by a user event, so the kernels they enqueue cannot start (and compete for the
    CPU) until the timing is done; then drains it."""
    gate = cl.UserEvent(handle.context)
    cl.enqueue_marker(handle.queue, wait_for=[gate])
    begin = time.perf_counter()
    for _ in range(block):
        call()
    took = time.perf_counter() - begin
    gate.set_status(cl.command_execution_status.COMPLETE)
    handle.queue.finish()
    return took / block


def run_overhead(handle, problem, solver, calls=CALLS, budget_s=1.0, block=1):
    """{'run_us', 'plan_us', 'enqueue_us', 'overhead_us', 'plan_overhead_us', 'calls'}: median
    host time per call of run(), of plan.run and of the bare invoker on ``problem``, and the
    first two less the third; the queue is held while ``block`` calls are timed and drained
    after them, and the rounds of calls stop at ``calls`` calls or, for slow kernels, at about
    ``budget_s`` (at least MIN_CALLS rounds)."""
    flags = cl.mem_flags.READ_WRITE
    bufs = {name: cl.Buffer(handle.context, flags, max(4, getattr(problem, name).nbytes))
            for name in ("x", "w", "y")}
    chosen = plan(handle, problem, solver)
    scratch = handle.scratch(chosen.workspace)
    invoker = handle.invoker(resolve_solver(handle, problem, solver), problem)
    buffers = Buffers(bufs["x"], bufs["w"], bufs["y"])
    begin = time.perf_counter()
    run(handle, problem, solver, **bufs)
    handle.queue.finish()
    once = time.perf_counter() - begin
    rounds = max(MIN_CALLS, min(calls // block, int(budget_s / (3 * block * once))))
    run_s, plan_s, bare_s = [], [], []
    for _ in range(rounds):
        run_s.append(_gated(handle, lambda: run(handle, problem, solver, **bufs), block))
        plan_s.append(_gated(handle, lambda: chosen.run(**bufs), block))
        bare_s.append(_gated(handle, lambda: invoker(buffers, scratch), block))
    run_us, plan_us, bare_us = (statistics.median(s) * 1e6 for s in (run_s, plan_s, bare_s))
    return {"run_us": run_us, "plan_us": plan_us, "enqueue_us": bare_us,
            "overhead_us": run_us - bare_us, "plan_overhead_us": plan_us - bare_us,
            "calls": rounds * block, "solver": solver, "problem": problem.key()}


def db_hit_us(handle, problem, calls=200):
    """{'find_us', 'get_solutions_us'}: median host time of a repeated find and get_solutions
    on ``problem``, a find-db hit in this process (the first find may benchmark; not timed)."""
    bufs = device_buffers(handle, random_tensors(problem))
    find(handle, problem, **bufs)
    timed = {}
    for name, call in (("find_us", lambda: find(handle, problem, **bufs)),
                       ("get_solutions_us", lambda: get_solutions(handle, problem))):
        samples = []
        for _ in range(calls):
            begin = time.perf_counter()
            call()
            samples.append(time.perf_counter() - begin)
        timed[name] = statistics.median(samples) * 1e6
    return timed


def _measure(key):
    """In the child: time Handle(), find(), compiling the winner and its first run for ``key``."""
    clock = time.perf_counter
    begin = clock()
    handle = Handle()
    made = clock()
    problem = Problem.from_key(key)
    bufs = device_buffers(handle, random_tensors(problem))
    start = clock()
    solutions = find(handle, problem, **bufs)
    found = clock()
    compile_solution(handle, problem, solutions[0].solver)
    compiled = clock()
    run(handle, problem, solutions[0].solver, **bufs)
    handle.queue.finish()
    ran = clock()
    with handle.timing_section() as timing:   # the kernel time, from a profiled run after it
        kernel_ms = elapsed_ms(run(timing, problem, solutions[0].solver, **bufs))
    return {"solver": solutions[0].solver, "source": solutions[0].source,
            "handle_ms": (made - begin) * 1e3,
            "find_ms": (found - start) * 1e3, "compile_ms": (compiled - found) * 1e3,
            "first_run_ms": (ran - compiled) * 1e3, "kernel_ms": kernel_ms,
            "first_run_extra_ms": (ran - compiled) * 1e3 - kernel_ms}


def _measure_finds(keys):
    """In the child: {'find_ms': [ms]}, the time of find() on each problem of ``keys``, one after
    the other on one handle."""
    handle, times = Handle(), []
    for key in keys:
        problem = Problem.from_key(key)
        bufs = device_buffers(handle, random_tensors(problem))
        begin = time.perf_counter()
        find(handle, problem, **bufs)
        times.append((time.perf_counter() - begin) * 1e3)
    return {"find_ms": times}


if __name__ == "__main__":
    print(json.dumps(_measure_finds(sys.argv[2:]) if sys.argv[1] == "--finds"
                     else _measure(sys.argv[1])))
