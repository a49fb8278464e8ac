"""`convsolve worker`: workers for a scheduler's address, which `tune --cluster ADDR` uses."""
import fcntl
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pytest
from convsolve.cli import commands as cli
from convsolve.db.find_db import FindDb
from convsolve.device.handle import caches_binaries
from convsolve.problem import Problem
from convsolve.scale.workers import COMPILE, TIMING, _device_lock, lock_path, worker_spec
from convsolve.solvers import registry as plugins

KEY = Problem.conv2d((1, 2, 5, 4), (3, 2, 3, 3), padding=1).key()


def test_worker_command_serves_a_scheduler_that_tune_uses(tmp_path, monkeypatch, capsys, handle):
    """A worker started by the command registers a timing resource for its device; tune with
    the scheduler's address runs there and records in the client's user db; SIGTERM ends the
    worker, which removes its scratch dbs."""
    distributed = pytest.importorskip("distributed")
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,cs_tunable")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    plugins.reset()
    problems = tmp_path / "problems.txt"
    problems.write_text(f"{KEY}\n")
    with distributed.LocalCluster(n_workers=0, dashboard_address=None) as cluster:
        worker = subprocess.Popen([sys.executable, "-m", "convsolve.cli", "worker",
                                   "--scheduler", cluster.scheduler_address])
        try:
            assert cli.main(["tune", "--file", str(problems), "--cluster",
                             cluster.scheduler_address, "--budget-configs", "2", "--quiet"]) == 0
            assert "line 1" in capsys.readouterr().out
            assert {r["solver"] for r in FindDb().rows()} == {"direct.NaiveFwd", "tunable.Spin"}
            assert [p.name for p in tmp_path.glob("convsolve-timing-*")]   # its scratch dbs
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(timeout=30) == 0
        finally:
            worker.kill()
    time.sleep(0.1)
    assert not list(tmp_path.glob("convsolve-timing-*"))
    assert handle.db_key in {r["device"] for r in FindDb().rows()}


def test_scratch_of_a_killed_client_is_removed_by_the_next(tmp_path, monkeypatch, handle):
    """A worker's scratch directory names the process that made it; the next worker_spec
    removes those whose process is gone (a client SIGKILLed with its local cluster) and keeps
    the live ones'."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.Popen(["true"])
    gone.wait()
    stale = tmp_path / f"convsolve-timing-{gone.pid}-abc"
    live = tmp_path / f"convsolve-compile-{os.getpid()}-def"
    other = tmp_path / f"convsolve-check-{gone.pid}-ghi"   # not a worker's
    for path in (stale, live, other):
        path.mkdir()
    _, made = worker_spec(handle)
    assert not stale.exists() and live.exists() and other.exists()
    assert os.path.basename(made).startswith(f"convsolve-timing-{os.getpid()}-")


HOLDER = """
import sys
from convsolve.scale.workers import _device_lock
with _device_lock(sys.argv[1], alone=sys.argv[2] == "alone"):
    print("held", flush=True)
    sys.stdin.read()   # until killed
"""


def _holder(kind, how, tmp_path):
    """A process holding the device lock of ``kind`` (``how``: alone or shared), once held."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, kind, how], text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              env={**os.environ, "TMPDIR": str(tmp_path)})
    assert holder.stdout.readline() == "held\n"
    return holder


def _free(lock, mode):
    """Whether ``lock`` (an open file) can be locked in ``mode`` now (then unlocked again)."""
    try:
        fcntl.flock(lock, mode | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    fcntl.flock(lock, fcntl.LOCK_UN)
    return True


def test_on_pocl_every_worker_times_holding_a_lock_its_death_releases(handle, tmp_path,
                                                                        monkeypatch):
    """PoCL hands over no built programs: a compile worker's spec times like the timing
    worker's (no build-ahead resource).  Workers hold a lock file of the host: alone to time,
    shared to build; a SIGKILLed holder's death releases it."""
    if caches_binaries(handle.device.platform):
        pytest.skip("the device's driver hands over built programs")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    for role in ("timing", "compile"):
        resources = worker_spec(handle, role=role)[0]["resources"]
        assert resources == {TIMING + handle.db_key: 1} and COMPILE + handle.db_key not in resources
    with open(lock_path(handle.db_key), "a") as lock:
        for how, shared_too in (("shared", True), ("alone", False)):
            holder = _holder(handle.db_key, how, tmp_path)
            try:
                assert _free(lock, fcntl.LOCK_SH) == shared_too
                assert not _free(lock, fcntl.LOCK_EX)
                holder.kill()
                holder.wait()
                assert _free(lock, fcntl.LOCK_EX)   # released by the holder's death
            finally:
                holder.kill()


def test_a_worker_waiting_to_time_goes_before_later_builds(handle, tmp_path, monkeypatch):
    """While a worker waits to hold the device alone (it holds the turnstile), a build waiting
    to hold it shared waits too, and goes once the turnstile is free."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    held = threading.Event()

    def build():
        with _device_lock(handle.db_key, alone=False):
            held.set()
    with open(lock_path(handle.db_key) + ".turnstile", "a") as turnstile:
        fcntl.flock(turnstile, fcntl.LOCK_EX)   # a timing worker waiting for the lock
        waiter = threading.Thread(target=build)
        waiter.start()
        assert not held.wait(0.2)
        fcntl.flock(turnstile, fcntl.LOCK_UN)
        assert held.wait(30)
        waiter.join()


def test_a_timing_behind_a_hung_build_goes_on_without_the_lock(handle, tmp_path, monkeypatch,
                                                               caplog):
    """A build holding the device shared past CONVSOLVE_FIND_BUILD_TIMEOUT_S (hung: here this
    process's own) does not keep a timing waiting for ever: it times without the lock, warns,
    and the process's later timings do not wait again."""
    from convsolve.scale import workers
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("CONVSOLVE_FIND_BUILD_TIMEOUT_S", "0.05")
    monkeypatch.setattr(workers, "_lock_broken", [])
    with _device_lock(handle.db_key, alone=False):
        for _ in range(2):
            with _device_lock(handle.db_key, alone=True):
                pass
    assert workers._lock_broken == [handle.db_key]
    assert caplog.text.count("was not free within 0.05 s") == 1
    with _device_lock(handle.db_key, alone=True), open(lock_path(handle.db_key), "a") as lock:
        assert _free(lock, fcntl.LOCK_EX)   # given up: it holds nothing now
