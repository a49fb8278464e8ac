"""Isolated find: solvers that hang or end the process cost a worker restart, not the caller."""
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import convsolve
import pyopencl as cl
import pytest
from convsolve import Problem, find
from convsolve.db.find_db import FindDb
from convsolve.device.timing import RunTimeout, wait
from convsolve.engine import worker
from convsolve.testing import device_buffers, random_tensors
from processes import running

PROBLEM = Problem.conv2d((1, 3, 6, 5), (4, 3, 3, 3), padding=1)


def test_hung_and_fatal_solvers_are_recorded_and_find_goes_on(handle, monkeypatch, caplog):
    """With CONVSOLVE_FIND_ISOLATION=process, a kernel that never ends and an invoker that kills
    its process are each recorded as failed; the honest solver is ranked."""
    caplog.set_level("INFO", logger="convsolve")
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,cs_deadly")
    monkeypatch.setenv("CONVSOLVE_DISABLE_SOLVERS", "deadly.NeverCompletes")
    monkeypatch.setenv("CONVSOLVE_FIND_ISOLATION", "process")
    monkeypatch.setenv("CONVSOLVE_FIND_RUN_TIMEOUT_S", "2")
    monkeypatch.setenv("CONVSOLVE_FIND_BUILD_TIMEOUT_S", "20")
    buffers = device_buffers(handle, random_tensors(PROBLEM))
    ranked = find(handle, PROBLEM, **buffers, mode="NORMAL")
    assert [s.solver for s in ranked] == ["direct.NaiveFwd"]
    failures = {r.solver: r.failure for r in FindDb().lookup(handle.db_key, PROBLEM.key())}
    assert failures["deadly.HangsRunning"] == ("failed to run: its kernels did not finish "
                                               "within 2 s (worker process restarted)")
    assert failures["deadly.EndsProcess"] == "ended the worker process (exit code 3)"


def test_isolated_find_agrees_with_find_in_process(handle, monkeypatch):
    """The same honest solvers rank in the worker as in process, and a second isolated find
    reuses the worker."""
    buffers = device_buffers(handle, random_tensors(PROBLEM))
    here = {s.solver for s in find(handle, PROBLEM, **buffers, mode="NORMAL")}
    monkeypatch.setenv("CONVSOLVE_FIND_ISOLATION", "process")
    there = {s.solver for s in find(handle, PROBLEM, **buffers, mode="NORMAL")}
    first = {index: w.process.pid for index, w in worker._workers.items()}
    find(handle, PROBLEM, **buffers, mode="NORMAL")
    assert here == there and first == {i: w.process.pid for i, w in worker._workers.items()}


def test_threads_share_the_worker_one_find_at_a_time(handle, monkeypatch):
    """Isolated finds from several threads each get their own answers from the one worker."""
    monkeypatch.setenv("CONVSOLVE_FIND_ISOLATION", "process")
    problems = [Problem.conv2d((1, 3, 6, 5 + i), (4, 3, 3, 3), padding=1) for i in range(4)]
    answers, errors = {}, []

    def search(problem):
        try:
            buffers = device_buffers(handle, random_tensors(problem))
            answers[problem] = [s.solver for s in find(handle, problem, **buffers,
                                                       mode="NORMAL")]
        except Exception as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)
    threads = [threading.Thread(target=search, args=(p,)) for p in problems]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors and all(answers[p] == ["direct.NaiveFwd"] for p in problems)


def test_bad_budget_is_the_callers_error_under_isolation(handle, monkeypatch):
    """A bad find setting is a ValidationError in the caller, not a worker failure."""
    monkeypatch.setenv("CONVSOLVE_FIND_ISOLATION", "process")
    monkeypatch.setenv("CONVSOLVE_FIND_SOLVER_BUDGET_MS", "abc")
    buffers = device_buffers(handle, random_tensors(PROBLEM))
    with pytest.raises(convsolve.ValidationError, match="CONVSOLVE_FIND_SOLVER_BUDGET_MS"):
        find(handle, PROBLEM, **buffers, mode="NORMAL")


def test_hung_run_in_process_fails_find_and_is_recorded(handle, monkeypatch):
    """In process, a run that never ends makes find fail naming the solver and the remedy, and
    the solver is recorded as failed so that no later find runs it again."""
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,cs_deadly")
    monkeypatch.setenv("CONVSOLVE_DISABLE_SOLVERS", "deadly.HangsRunning,deadly.EndsProcess")
    monkeypatch.setenv("CONVSOLVE_FIND_RUN_TIMEOUT_S", "0.2")
    import cs_deadly
    buffers = device_buffers(handle, random_tensors(PROBLEM))
    try:
        with pytest.raises(convsolve.FindError, match="'deadly.NeverCompletes' .* did not finish "
                           "within 0.2 s; the device queue .* CONVSOLVE_FIND_ISOLATION=process"):
            find(handle, PROBLEM, **buffers, mode="NORMAL")
    finally:
        cs_deadly.complete_pending()
    failures = {r.solver: r.failure for r in FindDb().lookup(handle.db_key, PROBLEM.key())}
    assert failures["deadly.NeverCompletes"].startswith("failed to run: its kernels did not")


def test_wait_gives_up_on_a_run_that_never_ends(handle):
    """timing.wait raises RunTimeout past its limit (a user event stands in for a hung kernel)."""
    never = cl.UserEvent(handle.context)
    try:
        with pytest.raises(RunTimeout, match="did not finish within 0.2 s"):
            wait([never], 0.2)
    finally:
        never.set_status(cl.command_execution_status.COMPLETE)


def test_bad_isolation_value_is_named(handle, monkeypatch):
    """CONVSOLVE_FIND_ISOLATION accepts none or process only."""
    monkeypatch.setenv("CONVSOLVE_FIND_ISOLATION", "threads")
    buffers = device_buffers(handle, random_tensors(PROBLEM))
    with pytest.raises(convsolve.ValidationError, match="CONVSOLVE_FIND_ISOLATION"):
        find(handle, PROBLEM, **buffers, mode="NORMAL")


#: A caller whose find meets a solver with a kernel that never finishes: it says the find
#: worker's pid once the worker has started that solver, then waits for ever for its reply.
ORPHANING_CALLER = """
import json
import convsolve
from convsolve.testing import device_buffers, random_tensors
from convsolve.engine import worker
receive = worker.Worker.receive
def announcing(self, limit_s):
    message = receive(self, limit_s)
    if message and message[0] == "start":
        print(json.dumps(self.process.pid), flush=True)
    return message
worker.Worker.receive = announcing
handle = convsolve.Handle()
problem = convsolve.Problem.conv2d((1, 3, 6, 5), (4, 3, 3, 3), padding=1)
convsolve.find(handle, problem, **device_buffers(handle, random_tensors(problem)))
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_the_find_worker_ends_with_its_sigkilled_caller(monkeypatch):
    """The find worker of a caller that is SIGKILLed ends within a few seconds, even inside a
    kernel that never finishes (issue 25 item 5: it ran on for a minute)."""
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_deadly")
    monkeypatch.setenv("CONVSOLVE_DISABLE_SOLVERS", "deadly.NeverCompletes,deadly.EndsProcess")
    monkeypatch.setenv("CONVSOLVE_FIND_ISOLATION", "process")
    monkeypatch.setenv("CONVSOLVE_FIND_RUN_TIMEOUT_S", "600")   # the caller waits for its reply
    caller = subprocess.Popen([sys.executable, "-c", ORPHANING_CALLER], stdout=subprocess.PIPE,
                              text=True)
    pid = None
    try:
        pid = json.loads(caller.stdout.readline())
        time.sleep(1.0)   # the kernel is running
        assert running(pid)
        caller.kill()
        caller.wait()
        deadline = time.monotonic() + 5
        while running(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not running(pid), f"find worker {pid} outlived its caller by 5 s"
    finally:
        caller.kill()
        if pid is not None and running(pid):
            os.kill(pid, signal.SIGKILL)
