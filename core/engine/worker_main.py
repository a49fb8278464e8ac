"""The find worker's child process (``python -m convsolve.engine.worker_main INDEX``): it times
the solvers of each request line on random tensors and answers one JSON line per solver
(engine/worker.py is the caller's side)."""
import json
import os
import sys

from .. import env
from ..device.handle import Handle
from ..device.tensors import device_buffers, random_epilogue_tensors, random_tensors
from ..problem import Problem
from ..solvers.policy import Policy
from ..solvers.registry import registry
from . import fusion
from .benchmark import QueueBlocked, benchmark
from .parallel import exit_with_parent
from .run import check_buffers

#: The policy the worker resolves candidates with: the caller's chose their names already.
ADMIT_ALL = Policy(reduced_precision=True)


def serve(device_index, parent_pid):
    """The worker's loop: benchmark the solvers of each request line, one reply line per solver.

    Replies go to the original stdout; anything else printed (by plugins, by the OpenCL
    runtime) goes to stderr, so it cannot corrupt them.  It ends soon after its caller, process
    ``parent_pid``, does, even inside a kernel that never finishes (parallel.exit_with_parent).
    """
    exit_with_parent(parent_pid)
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)

    def send(*message):
        replies.write(json.dumps(message) + "\n")
        replies.flush()
    device = Handle(str(device_index), profiling=True)   # it only times
    for line in sys.stdin:
        key, names, verify, switches, available, values = json.loads(line)
        for name in [n for n in os.environ if n.startswith("CONVSOLVE_")]:
            del os.environ[name]
        os.environ.update(switches)                  # the caller's switches, as of this find
        os.environ[env.FIND_ISOLATION.name] = "none"   # this process is the isolation
        os.environ[env.WORKSPACE_LIMIT.name] = str(available)   # the caller's scratch bytes
        try:
            problem = Problem.from_key(key)
            buffers = check_buffers(problem, **device_buffers(device, random_tensors(problem)))
            if problem.epilogue is not None:
                buffers = _with_epilogue(device, problem, buffers, values)
            best = None
            for name in names:
                send("start", name)
                skipped, failed = {}, {}
                try:
                    solver = (registry().solvers[name] if problem.epilogue is None
                              and name in registry().solvers
                              else fusion.resolve(problem, name, ADMIT_ALL))
                    timed = benchmark(device, problem, [solver], buffers, None, skipped, failed,
                                      verify, best)
                except QueueBlocked:   # this process's queue is stuck: report, then end
                    send("blocked", name, failed[name])
                    return
                if timed:
                    best = min(best or timed[0].time_ms, timed[0].time_ms)
                reply = [timed[0].time_ms, timed[0].workspace] if timed else None
                send("done", name, reply, skipped.get(name), name in failed)
        except Exception as exc:  # noqa: BLE001 - the core's own failure, not a solver's
            send("error", f"{type(exc).__name__}: {exc}")
            continue
        send("end")


def _with_epilogue(device, problem, buffers, values):
    """``buffers`` with epilogue values from ``values`` (epilogue_scalars) over random scale,
    bias and z tensors on ``device``."""
    parts = device_buffers(device, random_epilogue_tensors(problem, 1))
    if values["z_is_output"]:
        parts["z"] = getattr(buffers, problem.direction.output)
    return buffers.with_epilogue_args(fusion.epilogue_args(
        problem, buffers, device, **parts, alpha=values["alpha"], beta=values["beta"],
        z_scale=values["z_scale"], activation=tuple(values["activation"])))


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]))
