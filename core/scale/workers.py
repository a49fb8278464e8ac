"""Dask workers of convsolve: one timing worker per device, compile workers beside it.

A worker is a Dask Nanny (it restarts its process when that dies) with one thread and the
resource ``convsolve-compile:<device kind>`` (the device's ``Handle.db_key``): it builds the
kernels of jobs ahead of their timing (PoCL's kernel cache, or convsolve's binary cache
elsewhere, on the same host hands them over). The one worker that times on a device also has
``convsolve-timing:<device kind>``, so at most one timing job runs per device; it compiles too
while no timing job is ready. On a CPU device the timings run beside other workers' builds. Each
worker's process sees its device through CONVSOLVE_DEVICE and its own scratch dbs through
CONVSOLVE_USER_DB_PATH / CONVSOLVE_PERF_DB_PATH, so nothing it measures reaches a user db but
through the client.
"""
import asyncio
import functools
import glob
import logging
import os
import shutil
import signal
import tempfile

import pyopencl as cl

from .. import env
from ..db import transfer
from ..device.handle import Handle, caches_binaries
from ..device.tensors import device_buffers, random_tensors
from ..device.timing import wait
from ..engine import fusion
from ..engine.parallel import BUILD_AHEAD
from ..engine.run import check_buffers
from ..engine.search import tuned_invoker
from ..errors import ConvsolveError
from ..problem import Problem
from ..solvers.calls import workspace_of
from ..solvers.registry import registry
from .jobs import run_job

TIMING, COMPILE = "convsolve-timing:", "convsolve-compile:"

#: Seconds between a worker's attempts to reach its scheduler.
RECONNECT_S = 1.0
log = logging.getLogger("convsolve")

_handle = []   # this worker process's Handle, made on its first job


def _worker_handle():
    if not _handle:
        _handle.append(Handle())   # the device CONVSOLVE_DEVICE names, set by worker_spec
    return _handle[0]


def remote(job, seed, *built):
    """Run ``job`` on this worker's device, the client's ``seed`` rows (export format) merged
    into its scratch dbs first; ``built`` is the compile job it waited for, if any.  Where the
    driver's binaries are cached, the job's builds go to the compile workers of its device kind
    first (BUILD_AHEAD): a process builds one program at a time there."""
    if seed:
        transfer.merge_rows(seed)
    handle = _worker_handle()
    if not caches_binaries(handle.device.platform):
        return run_job(job, handle)
    token = BUILD_AHEAD.set(functools.partial(_build_on_compile_workers, job.device))
    try:
        return run_job(job, handle)
    finally:
        BUILD_AHEAD.reset(token)


def _build_on_compile_workers(kind, builds):
    """Build ``builds`` ([(solver name, problem key, config)]) on the workers of device kind
    ``kind``, one task each, this task seceded meanwhile; how many built.  Waits
    CONVSOLVE_FIND_BUILD_TIMEOUT_S at most (the builds left are this worker's own)."""
    from distributed import wait, worker_client
    with worker_client() as client:
        futures = [client.submit(build_one, *build, pure=False, resources={COMPILE + kind: 1})
                   for build in builds]
        try:
            wait(futures, timeout=env.positive_number(env.FIND_BUILD_TIMEOUT_S))
        except (TimeoutError, asyncio.TimeoutError):
            log.info("builds ahead of %d configs overdue: the search builds the rest", len(builds))
        built = sum(bool(f.result()) for f in futures if f.status == "finished")
        client.cancel([f for f in futures if f.status != "finished"])
        return built


def build_one(solver_name, problem_key, config):
    """Build one config of a solver for a problem on this worker's device (into the binary
    cache); whether it built.  Failures are the search's, which builds again."""
    try:
        _worker_handle().invoker(registry().get(solver_name), Problem.from_key(problem_key), config)
        return True
    except (ConvsolveError, cl.Error):
        return False


def prebuild(job, seed):
    """Build every candidate's kernels for ``job``'s problem with the config it builds now (what
    find and the collector build first); how many built.  On PoCL, which generates a kernel's
    code at its first launch (for its work-group size), each is also run once on random
    tensors, so that PoCL's cache holds that code too.  Failures are the timing job's."""
    if seed:
        transfer.merge_rows(seed)
    handle, problem, built = _worker_handle(), Problem.from_key(job.problem), 0
    launch = not caches_binaries(handle.device.platform)
    raw = device_buffers(handle, random_tensors(problem, 0)) if launch else {}
    buffers = check_buffers(problem, raw["x"], raw["w"], raw["y"], handle) if launch else None
    for solver in fusion.candidates(problem)[0]:
        try:
            invoker = tuned_invoker(handle, solver, problem)
            built += 1
            if launch:
                need = workspace_of(solver, problem, handle)
                scratch = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, need) if need else None
                wait(invoker(buffers, scratch), env.positive_number(env.FIND_RUN_TIMEOUT_S))
        except (ConvsolveError, cl.Error):
            pass
    return built


def _sweep():
    """Remove the scratch directories of worker_spec's callers that are gone (SIGKILLed)."""
    for path in glob.glob(os.path.join(tempfile.gettempdir(), "convsolve-*-*-*")):
        pid = os.path.basename(path).split("-")[2]
        if os.path.basename(path).split("-")[1] in ("timing", "compile") and pid.isdigit():
            try:
                os.kill(int(pid), 0)
            except ProcessLookupError:
                shutil.rmtree(path, ignore_errors=True)
            except PermissionError:   # alive, another user's
                pass


def worker_spec(kind, device=None, role="timing"):
    """(Nanny options, scratch directory) of a worker on ``device`` (a CONVSOLVE_DEVICE spec;
    None: the default device), whose kind is ``kind``, as ``role`` ("timing" or "compile")."""
    _sweep()
    scratch = tempfile.mkdtemp(prefix=f"convsolve-{role}-{os.getpid()}-")
    env = {"CONVSOLVE_USER_DB_PATH": os.path.join(scratch, "find.sqlite"),
           "CONVSOLVE_PERF_DB_PATH": os.path.join(scratch, "perf.sqlite")}
    if device is not None:
        env["CONVSOLVE_DEVICE"] = str(device)
    resources = {COMPILE + kind: 1, **({TIMING + kind: 1} if role == "timing" else {})}
    return {"nthreads": 1, "resources": resources, "env": env,
            "silence_logs": logging.WARNING}, scratch


def serve(scheduler, device=None, compile_workers=0):
    """Run a timing worker on ``device`` and ``compile_workers`` compile workers, connected to
    ``scheduler`` (an address or a scheduler file), until SIGINT / SIGTERM (their scratch
    directories are removed then); when the scheduler goes away they connect again."""
    from distributed import Nanny
    kind = Handle(device).db_key
    specs = [worker_spec(kind, device, "timing")] + [worker_spec(kind, device, "compile")
                                                     for _ in range(compile_workers)]
    address = {"scheduler_file": scheduler} if os.path.isfile(scheduler) else {
        "scheduler_ip": scheduler}

    async def run():
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(sig, stop.set)
        while not stop.is_set():   # a scheduler that went away (restarted): connect again
            nannies = [Nanny(**address, **options) for options, _ in specs]
            try:
                await asyncio.gather(*nannies)
            except (OSError, asyncio.TimeoutError) as exc:
                log.warning("convsolve worker: cannot reach %s (%s): trying again", scheduler, exc)
                await asyncio.gather(*(n.close() for n in nannies), return_exceptions=True)
                await asyncio.sleep(RECONNECT_S)
                continue
            waits = [asyncio.ensure_future(n.finished()) for n in nannies]
            await asyncio.wait([*waits, asyncio.ensure_future(stop.wait())],
                               return_when=asyncio.FIRST_COMPLETED)
            await asyncio.gather(*(nanny.close() for nanny in nannies), return_exceptions=True)
    try:
        asyncio.run(run())
    finally:
        for _, scratch in specs:
            shutil.rmtree(scratch, ignore_errors=True)
