"""check_solver's worker process (``python -m convsolve.testing.isolation_main TARGET FOLDER
PARENT_PID``): it checks each request's problems on a device or on Oclgrind and answers JSON
lines (isolation.py is the caller's side and says what the lines are)."""
import base64
import functools
import json
import os
import pickle
import shutil
import sys
from pathlib import Path

from ..device.handle import Handle
from ..engine.parallel import exit_with_parent
from ..problem import Problem
from . import check_problem
from .isolation import distinct, label, oclgrind_handle, stderr_reports


class _Growth:
    """What has been appended to a file since the last call."""

    def __init__(self, path):
        self.path, self.seen = Path(path), 0

    def read(self):
        if not self.path.exists():
            return ""
        with open(self.path, "rb") as file:
            file.seek(self.seen)
            data = file.read()
        self.seen += len(data)
        return data.decode(errors="replace")


def _progress(logs, send, key, reports):
    """check_problem's ``progress(problem, config)`` in a worker: Oclgrind's reports since the
    last run go to ``reports``, named by that run; then the next run is announced."""
    running = [key]

    def progress(problem=None, config=None):
        found = stderr_reports(logs[0].read())
        found += [r.strip() for r in logs[1].read().split("\n\n") if r.strip()]
        reports.extend(f"{running[0]}: Oclgrind: {r}" for r in distinct(found))
        if problem is not None:
            running[0] = label(problem.key(), config)
            send("start", key, config)
    return progress


def serve(target, folder, parent_pid):
    """The worker's loop: check each request's problems, one reply line per run and problem.

    Replies go to the original stdout; anything else printed (by plugins, by the OpenCL runtime)
    goes to stderr, which the caller has pointed at a file.  The worker ends, removing
    ``folder``, at the end of its stdin and when its caller, process ``parent_pid``, ends,
    even in a kernel that never finishes (a SIGKILLed caller runs no atexit to remove it).
    """
    remove = functools.partial(shutil.rmtree, folder, True)
    exit_with_parent(parent_pid, remove)
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)

    def send(*message):
        replies.write(json.dumps(message) + "\n")
        replies.flush()
    kind, where = target
    handle = oclgrind_handle(where) if kind == "oclgrind" else Handle(str(where))
    logs = [_Growth(Path(folder) / "stderr.txt"), _Growth(Path(folder) / "oclgrind.log")]
    for line in sys.stdin:
        request = json.loads(line)
        for name in [n for n in os.environ if n.startswith("CONVSOLVE_")]:
            del os.environ[name]
        os.environ.update(request["env"], **({"CONVSOLVE_DISABLE_CACHE": "1"}
                                             if kind == "oclgrind" else {}))
        sys.path[:0] = [path for path in request["path"] if path not in sys.path]
        try:
            solver = pickle.loads(base64.b64decode(request["solver"]))
        except Exception as exc:  # noqa: BLE001 - reported to the caller, who names the solver
            send("error", f"the worker process cannot unpickle the solver: {exc!r}")
            continue
        for key, configs, epilogues, thorough in request["problems"]:
            for log in logs:   # what came before the problem belongs to none
                log.read()
            reports = []
            progress = _progress(logs, send, key, reports)
            failures = check_problem(solver, handle, Problem.from_key(key), request["seed"],
                                     configs, progress, epilogues, thorough)
            progress()
            send("done", key, failures, reports)
        send("end")
    remove()


if __name__ == "__main__":
    serve(tuple(json.loads(sys.argv[1])), sys.argv[2], int(sys.argv[3]))
