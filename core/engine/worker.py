"""Benchmarking in a long-lived worker process per device (CONVSOLVE_FIND_ISOLATION=process):
the caller's side; the child's loop is worker_main.py.

A solver whose kernel never finishes, or whose invoker kills the OpenCL runtime or the process,
takes only the worker down: the caller records it as failed, starts a new worker and goes on
with the other candidates.  The worker times each candidate on random tensors of the problem
(not on the caller's buffers) and reports one solver at a time; the caller keeps the find-db.
A problem with an epilogue is timed with the caller's values (alpha, beta, z_scale, the
activation's parameters, whether z is the output's buffer) over random scale, bias and z, each
candidate (fusion.py) by its name.
"""
import json
import logging
import os
import subprocess
import sys
import threading

from .. import env
from ..device.handle import list_devices
from ..errors import FindError
from .parallel import LineReader
from .solutions import Solution

log = logging.getLogger("convsolve")

#: Seconds a new worker may take to start (imports, device probe) on top of the first limit.
STARTUP_S = 60

_workers = {}          # device index -> Worker, one per device per process
_device_locks = {}     # device index -> Lock held by the find talking to that worker
_lock = threading.Lock()


def epilogue_scalars(problem, buffers):
    """What the worker needs of the caller's epilogue values (None without an epilogue): the
    scalars, and whether z is the output's buffer; the worker makes its own tensors."""
    args = buffers.epilogue_args
    if args is None:
        return None
    activation = args.activation
    return {"alpha": args.alpha, "beta": args.beta, "z_scale": args.z_scale,
            "activation": [activation.mode, activation.a, activation.b, activation.g],
            "z_is_output": args.z is not None and args.z == getattr(
                buffers, problem.direction.output)}


class Worker:
    """One worker process on one device, restarted by its owner when it dies or hangs; it sees
    this process's sys.path, and a thread reads its replies into a queue."""

    def __init__(self, device_index):
        path = os.pathsep.join(p for p in sys.path if p)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "convsolve.engine.worker_main", str(device_index),
             str(os.getpid())],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": path})
        self.replies = LineReader(self.process.stdout)

    def send(self, *request):
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()

    def receive(self, limit_s):
        """The next reply, or None when there is none within ``limit_s`` seconds; EOFError
        when the worker has ended."""
        return self.replies.next(limit_s)

    def stop(self):
        self.process.kill()
        self.process.wait()
        self.process.stdin.close()
        self.process.stdout.close()


def _device_index(handle):
    for index, (_, device) in enumerate(list_devices()):
        if device == handle.device:
            return index
    raise FindError(f"{handle.name} is not among the listed devices: cannot start a worker")


def _worker(index):
    with _lock:
        worker = _workers.get(index)
        if worker is None or worker.process.poll() is not None:
            worker = _workers[index] = Worker(index)
        return worker


def _restart(index, worker):
    worker.stop()
    with _lock:
        if _workers.get(index) is worker:
            del _workers[index]


def benchmark(handle, problem, solvers, available, skipped, failed, verify, values=None):
    """Solutions of ``solvers`` timed in the device's worker, fastest first, each with at most
    ``available`` bytes of workspace; a solver that hangs past the build and run limits or ends
    the worker is recorded in ``failed``.  ``values``: epilogue_scalars() of the caller's
    buffers.  One find at a time uses a device's worker."""
    index = _device_index(handle)
    limit_s = (env.positive_number(env.FIND_BUILD_TIMEOUT_S)
               + env.positive_number(env.FIND_RUN_TIMEOUT_S))
    env.positive_number(env.FIND_SOLVER_BUDGET_MS)   # a bad value is the caller's error
    with _lock:
        device_lock = _device_locks.setdefault(index, threading.Lock())
    with device_lock:
        return _exchange(handle, index, problem, solvers, available, skipped, failed, verify,
                         limit_s, values)


def _exchange(handle, index, problem, solvers, available, skipped, failed, verify, limit_s,
              values):
    """benchmark()'s conversation with the worker, restarting it after a hung or fatal solver."""
    switches = {name: value for name, value in os.environ.items() if name.startswith("CONVSOLVE_")}
    by_name = {solver.name: solver for solver in solvers}
    pending, results = list(by_name), []
    while pending:
        worker, current = _worker(index), None
        try:
            worker.send(problem.key(), pending, verify, switches, available, values)
            while True:
                message = worker.receive(limit_s if current else limit_s + STARTUP_S)
                if message is None:
                    why = f"did not finish within {limit_s:g} s (worker process restarted)"
                    break
                if message[0] == "end":
                    return sorted(results, key=lambda s: s.time_ms)
                if message[0] == "blocked":
                    why = f"{message[2]} (worker process restarted)"
                    break
                if message[0] == "error":
                    raise FindError(f"the benchmark worker for {handle.name} failed on "
                                    f"{problem.key()}: {message[1]}")
                if message[0] == "start":
                    current = message[1]
                    continue
                _, name, reply, reason, is_failure = message   # "done"
                pending.remove(name)
                current = None
                if reply is None and reason:
                    skipped[name] = reason
                    if is_failure:
                        failed[name] = reason
                    log.info("skip %r: %s", name, reason)
                elif reply is not None:
                    results.append(Solution(name, by_name[name].family, reply[0], reply[1],
                                            "benchmark"))
        except (EOFError, OSError):
            why = f"ended the worker process (exit code {worker.process.wait()})"
        _restart(index, worker)
        if current is None:   # died between solvers: nothing to blame, but no answer either
            raise FindError(f"the benchmark worker for {handle.name} failed: {why}")
        pending.remove(current)
        skipped[current] = failed[current] = why
        log.warning("skip %r: %s", current, why)
    return sorted(results, key=lambda s: s.time_ms)

