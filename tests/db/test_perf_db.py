"""The perf-db: trials per config, fastest first, failures never best; the system db below the
user db; many writers and a read-only file (the store's own cases, a corrupt file among them:
test_store.py)."""
import json
import multiprocessing

import pytest
from convsolve.db.perf_db import PerfDb, Trial
from convsolve.errors import DatabaseError
from test_store import _logged, as_other_user, readable_convsolve, world_dir  # noqa: F401

KEY = "fwd-n1-c3-h8-w8-k4-y3-x3-p0.0-q0.0-u1-v1-l1-j1-g1-float32-NCHW"
SOLVER = "gemm.Tuned"


def _line(config, time_ms=None, failure=None, device="dev", solver=SOLVER):
    return json.dumps({"db": "perf", "device": device, "problem": KEY, "solver": solver,
                       "config": config, "time_ms": time_ms, "failure": failure}) + "\n"


def test_trials_fastest_first_failures_last_and_upserted_by_config(tmp_path):
    """trials() lists the fastest first and failures last; storing a config again (its keys in
    another order) replaces its trial; best() is the fastest that did not fail."""
    db = PerfDb(tmp_path / "perf.sqlite", tmp_path / "none.jsonl")
    db.store("dev", KEY, SOLVER, [Trial({"TM": 6, "TN": 16}, 2.0), Trial({"TM": 6, "TN": 32}, 1.0),
                                  Trial({"TM": 1, "TN": 1}, None, "build failed: no")])
    assert [(t.config["TN"], t.time_ms) for t in db.trials("dev", KEY, SOLVER)] == [
        (32, 1.0), (16, 2.0), (1, None)]
    assert db.best("dev", KEY, SOLVER) == Trial({"TM": 6, "TN": 32}, 1.0)
    db.store("dev", KEY, SOLVER, [Trial({"TN": 16, "TM": 6}, 0.5)])
    assert db.best("dev", KEY, SOLVER).config == {"TM": 6, "TN": 16}
    assert len(db.trials("dev", KEY, SOLVER)) == 3 and len(db.rows()) == 3
    assert db.trials("dev", KEY, "gemm.Other") == [] and db.best("other", KEY, SOLVER) is None
    assert db.rows()[0]["config"] == {"TM": 6, "TN": 16}
    db.store("dev", "other-problem", SOLVER, [Trial({"TM": 6, "TN": 16}, 1.0)])
    assert db.forget("dev", KEY) == 3 and len(db.rows()) == 1
    assert db.clear() == 1 and db.rows() == []


def test_a_failure_is_never_best(tmp_path):
    """A failed trial is not best, even one that carries a (fast) time."""
    db = PerfDb(tmp_path / "perf.sqlite", tmp_path / "none.jsonl")
    db.store("dev", KEY, SOLVER, [Trial({"T": 1}, 0.1, "wrong output"),
                                  Trial({"T": 2}, None, "run failed")])
    assert db.best("dev", KEY, SOLVER) is None
    assert all(t.failure for t in db.trials("dev", KEY, SOLVER))
    db.store("dev", KEY, SOLVER, [Trial({"T": 3}, 9.0)])
    assert db.best("dev", KEY, SOLVER).config == {"T": 3}
    assert db.trials("dev", KEY, SOLVER)[0].config == {"T": 3}


def test_system_db_answers_below_the_user_db(tmp_path, caplog):
    """The system db's perf lines answer where the user db has no trial that did not fail; its
    find lines and bad lines are passed over (bad ones logged); the user db's best overrides it;
    tuned() still answers from it when the user db cannot be read."""
    system = tmp_path / "system.jsonl"
    system.write_text('{"format": "convsolve-db", "version": 1}\n# comment\n'
                      f'{{"device": "dev", "problem": "{KEY}", "solver": "a.X", "family": "a", '
                      '"time_ms": 1}\n'
                      + _line({"T": 4}, 3.0) + _line({"T": 5}, 2.0) + _line({"T": 6}, 0.1, "bad")
                      + _line({"T": 7}, 0.5, device="other") + '{"db": "perf", "device": "dev"}\n')
    db = PerfDb(tmp_path / "perf.sqlite", system)
    assert db.best("dev", KEY, SOLVER) == Trial({"T": 5}, 2.0, None, "system")
    assert "system perf-db" in caplog.text and "line 8 skipped" in caplog.text
    db.store("dev", KEY, SOLVER, [Trial({"T": 8}, None, "build failed")])
    assert db.best("dev", KEY, SOLVER).source == "system"
    db.store("dev", KEY, SOLVER, [Trial({"T": 9}, 4.0)])
    assert db.best("dev", KEY, SOLVER) == Trial({"T": 9}, 4.0)
    (tmp_path / "file").write_text("")
    unreadable = PerfDb(tmp_path / "file" / "perf.sqlite", system)
    with pytest.raises(DatabaseError, match="perf-db"):
        unreadable.best("dev", KEY, SOLVER)
    caplog.clear()
    assert unreadable.tuned("dev", KEY, SOLVER).config == {"T": 5}
    assert "its tuned configs are not used" in caplog.text


def _writer(path, worker):
    db = PerfDb(path, path.parent / "none.jsonl")
    for i in range(20):
        db.store("dev", f"{KEY}-{worker}-{i}", SOLVER, [Trial({"T": 1}, float(i)),
                                                       Trial({"T": 2}, None, "no build")])


def test_concurrent_writers_lose_nothing(tmp_path):
    """Four processes writing at once all land, each problem with both of its trials."""
    path = tmp_path / "perf.sqlite"
    PerfDb(path).rows()
    procs = [multiprocessing.get_context("spawn").Process(target=_writer, args=(path, w))
             for w in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    assert len(PerfDb(path).rows()) == 4 * 20 * 2


def _read_and_write(path):
    """What a process that cannot write ``path`` gets from the PerfDb methods."""
    db = PerfDb(path, path.parent / "none.jsonl")
    best = db.best("dev", KEY, SOLVER)
    return {"best": best and best.config, "rows": len(db.rows()),
            "store": _logged(db.store, "dev", KEY, SOLVER, [Trial({"T": 2}, 0.5)])[0],
            "keep": _logged(db.keep, "dev", KEY, SOLVER, [Trial({"T": 2}, 0.5)])}


def test_reads_work_from_a_read_only_file(world_dir, as_other_user):  # noqa: F811 - fixtures
    """A perf-db file (and directory) the user cannot write still answers best() and rows();
    store raises DatabaseError saying it is read-only and keep() warns and returns False.
    Simulated as in test_find_db (a worker process as uid 65534)."""
    path = world_dir / "perf.sqlite"
    PerfDb(path).store("dev", KEY, SOLVER, [Trial({"T": 1}, 1.0)])
    path.chmod(0o444)
    world_dir.chmod(0o555)
    got = as_other_user(_read_and_write, path)
    assert got["best"] == {"T": 1} and got["rows"] == 1
    assert isinstance(got["store"], DatabaseError) and "read-only" in str(got["store"])
    assert got["keep"][0] is False and "were not recorded" in got["keep"][1]
