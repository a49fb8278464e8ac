"""Dask workers of convsolve: on each device, workers that time and workers that build ahead.

A worker is a Dask Nanny (it restarts its process when that dies) with one thread.  Where the
device's driver hands over built programs (convsolve's binary cache: NVIDIA and every other
platform but PoCL), one worker times on the device (the resource ``convsolve-timing:<device
kind>``, the device's ``Handle.db_key``), so at most one timing job runs there, and the others
only build (``convsolve-compile:<device kind>``): each job's kernels ahead of its timing, and
the configs a timing job's search hands them; the timing worker builds too while no timing job
is ready.  PoCL generates a kernel's code at its first launch, in the process that launches it,
so building elsewhere hands over nothing: there every worker runs whole jobs, and holds the
device alone while it times, beside the others while it builds and warms up (``_device_lock``:
a lock file of this host, since a CPU device is its host's).  Each worker's process sees its device
through CONVSOLVE_DEVICE and its own scratch dbs through CONVSOLVE_USER_DB_PATH /
CONVSOLVE_PERF_DB_PATH, so nothing it measures reaches a user db but through the client.
"""
import asyncio
import contextlib
import fcntl
import functools
import glob
import hashlib
import logging
import os
import shutil
import signal
import tempfile
import time

import pyopencl as cl

from .. import env
from ..db import transfer
from ..device.handle import Handle, caches_binaries
from ..device.timing import HOLD
from ..engine import fusion
from ..engine.parallel import BUILD_AHEAD
from ..engine.search import tuned_invoker
from ..errors import ConvsolveError
from ..problem import Problem
from ..solvers.registry import registry
from .jobs import run_job

TIMING, COMPILE = "convsolve-timing:", "convsolve-compile:"

#: Seconds between a timing worker's looks at a device lock held by others.
LOCK_POLL_S = 0.001
_lock_broken = []   # the device kind whose lock this process gave up waiting for, if any
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
    first (BUILD_AHEAD): a process builds one program at a time there; elsewhere it holds the
    device against the other workers (HOLD): alone to time, shared to build and warm up."""
    if seed:
        transfer.merge_rows(seed)
    handle = _worker_handle()
    if caches_binaries(handle.device.platform):
        token = BUILD_AHEAD.set(functools.partial(_build_on_compile_workers, job.device))
    else:
        token = HOLD.set(functools.partial(_device_lock, job.device))
    try:
        return run_job(job, handle)
    finally:
        token.var.reset(token)


@contextlib.contextmanager
def _device_lock(kind, alone):
    """Hold the device of kind ``kind`` against this host's other workers: ``alone`` (to time),
    an exclusive lock on a file named by the kind in the temp directory, else (to build, to
    warm up) a shared one.  A worker waiting to hold it alone first takes the file's turnstile,
    which holders not alone pass through, so builds do not keep a timing waiting.  The kernel
    releases the locks of a process that dies, SIGKILL included.  A build that hangs holds its
    share until it returns: a timing that cannot hold the device alone within
    CONVSOLVE_FIND_BUILD_TIMEOUT_S times without it, and this process's later ones too."""
    path = lock_path(kind)
    with open(path + ".turnstile", "a") as turnstile, open(path, "a") as lock:
        if not alone:
            fcntl.flock(turnstile, fcntl.LOCK_EX)   # behind a worker waiting to time
            fcntl.flock(turnstile, fcntl.LOCK_UN)
            fcntl.flock(lock, fcntl.LOCK_SH)
        elif not _lock_broken:
            wait_s = env.positive_number(env.FIND_BUILD_TIMEOUT_S)
            deadline = time.monotonic() + wait_s
            if not (_take(turnstile, deadline) and _take(lock, deadline)):
                _lock_broken.append(kind)
                log.warning("the device lock of %s was not free within %g s (a hung build?): "
                            "this worker times without it from now on", kind, wait_s)
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        yield   # closing the files releases the lock


def _take(file, deadline):
    """Lock ``file`` exclusively by ``deadline`` (time.monotonic()); whether it did."""
    while True:
        try:
            fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() > deadline:
                return False
            time.sleep(LOCK_POLL_S)


def lock_path(kind):
    """The lock file of device kind ``kind`` on this host (_device_lock's)."""
    name = hashlib.sha256(kind.encode()).hexdigest()[:16]
    return os.path.join(tempfile.gettempdir(), f"convsolve-device-{name}.lock")


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
    find and the collector build first), into the binary cache; how many built.  Failures are
    the timing job's."""
    if seed:
        transfer.merge_rows(seed)
    handle, problem, built = _worker_handle(), Problem.from_key(job.problem), 0
    for solver in fusion.candidates(problem)[0]:
        try:
            tuned_invoker(handle, solver, problem)
            built += 1
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


def worker_spec(handle, device=None, role="timing"):
    """(Nanny options, scratch directory) of a worker on ``device`` (a CONVSOLVE_DEVICE spec;
    None: the default device), whose Handle is ``handle``, as ``role`` ("timing" or "compile";
    on PoCL both run whole jobs, each timing alone)."""
    _sweep()
    scratch = tempfile.mkdtemp(prefix=f"convsolve-{role}-{os.getpid()}-")
    env = {"CONVSOLVE_USER_DB_PATH": os.path.join(scratch, "find.sqlite"),
           "CONVSOLVE_PERF_DB_PATH": os.path.join(scratch, "perf.sqlite")}
    if device is not None:
        env["CONVSOLVE_DEVICE"] = str(device)
    kind = handle.db_key
    if not caches_binaries(handle.device.platform):
        resources = {TIMING + kind: 1}
    else:
        resources = {COMPILE + kind: 1, **({TIMING + kind: 1} if role == "timing" else {})}
    return {"nthreads": 1, "resources": resources, "env": env,
            "silence_logs": logging.WARNING}, scratch


def serve(scheduler, device=None, compile_workers=0):
    """Run a timing worker on ``device`` and ``compile_workers`` compile workers, connected to
    ``scheduler`` (an address or a scheduler file), until SIGINT / SIGTERM (their scratch
    directories are removed then); when the scheduler goes away they connect again."""
    from distributed import Nanny
    handle = Handle(device)
    specs = [worker_spec(handle, device, "timing")] + [worker_spec(handle, device, "compile")
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
