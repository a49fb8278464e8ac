"""`convsolve worker`: workers for a scheduler's address, which `tune --cluster ADDR` uses."""
import signal
import subprocess
import sys
import time

import pytest
from convsolve.cli import commands as cli
from convsolve.db.find_db import FindDb
from convsolve.problem import Problem
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


def test_scratch_of_a_killed_client_is_removed_by_the_next(tmp_path, monkeypatch):
    """A worker's scratch directory names the process that made it; the next worker_spec
    removes those whose process is gone (a client SIGKILLed with its local cluster) and keeps
    the live ones'."""
    import os
    import tempfile

    from convsolve.scale.workers import worker_spec
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.Popen(["true"])
    gone.wait()
    stale = tmp_path / f"convsolve-timing-{gone.pid}-abc"
    live = tmp_path / f"convsolve-compile-{os.getpid()}-def"
    other = tmp_path / f"convsolve-check-{gone.pid}-ghi"   # not a worker's
    for path in (stale, live, other):
        path.mkdir()
    _, made = worker_spec("dev/1cu")
    assert not stale.exists() and live.exists() and other.exists()
    assert os.path.basename(made).startswith(f"convsolve-timing-{os.getpid()}-")
