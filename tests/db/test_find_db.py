"""The find-db: user over system, bad records skipped, failures listed; lookups, store and `db
show` on read-only, corrupt and unusable files (the store's own cases: test_store.py); concurrent
writers lose nothing; schema-2 records copied."""
import contextlib
import io
import json
import multiprocessing
import os
import re
import sqlite3
from pathlib import Path

import pytest
from convsolve.cli import main
from convsolve.db.find_db import FindDb, Record
from convsolve.errors import DatabaseError
from test_store import _logged, as_other_user, readable_convsolve, world_dir  # noqa: F401

KEY = "fwd-n1-c3-h8-w8-k4-y3-x3-p0.0-q0.0-u1-v1-l1-j1-g1-float32-NCHW"


def test_store_replaces_and_lookup_sorts(tmp_path):
    """store() replaces a problem's records; lookup() returns them fastest first."""
    db = FindDb(tmp_path / "db.sqlite")
    db.store("dev", KEY, [Record("a.X", "a", 2.0, 0), Record("b.Y", "b", 1.0, 64)])
    assert [(r.solver, r.source) for r in db.lookup("dev", KEY)] == [("b.Y", "user"), ("a.X", "user")]
    db.store("dev", KEY, [Record("c.Z", "c", 3.0, 0)])
    assert [r.solver for r in db.lookup("dev", KEY)] == ["c.Z"]
    assert db.lookup("other", KEY) == []
    assert db.clear() == 1 and db.rows() == []


def test_system_db_answers_below_the_user_db(tmp_path):
    """The JSON-lines system db answers misses; bad lines are skipped; the user db overrides it."""
    system = tmp_path / "system.jsonl"
    system.write_text(
        "# comment\n"
        f'{{"device": "dev", "problem": "{KEY}", "solver": "s.A", "family": "s", '
        '"time_ms": 5, "workspace": 0}\n'
        "not json\n"
        '{"device": "dev"}\n')
    db = FindDb(tmp_path / "db.sqlite", system)
    assert [(r.solver, r.source) for r in db.lookup("dev", KEY)] == [("s.A", "system")]
    db.store("dev", KEY, [Record("u.B", "u", 9.0, 0)])
    assert [r.solver for r in db.lookup("dev", KEY)] == ["u.B"]


def _writer(path, worker):
    db = FindDb(path)
    for i in range(25):
        db.store("dev", f"{KEY}-{worker}-{i}", [Record("a.X", "a", float(i), 0),
                                                Record("b.Y", "b", float(i) + 1, 0)])


def test_concurrent_writers_lose_nothing(tmp_path):
    """Four processes writing at once all land, each problem with both of its records."""
    path = tmp_path / "db.sqlite"
    FindDb(path).rows()
    procs = [multiprocessing.get_context("spawn").Process(target=_writer, args=(path, w))
             for w in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
        assert proc.exitcode == 0
    assert len(FindDb(path).rows()) == 4 * 25 * 2


# {{{ what the user cannot write, seen through the find-db and `convsolve db show`

def _cli(db_path, *argv):
    """(exit code, stdout, stderr) of ``convsolve *argv`` with the user db at ``db_path``."""
    from convsolve.cli import main
    os.environ["CONVSOLVE_USER_DB_PATH"] = str(db_path)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def _read_and_write(path):
    """What a process that cannot write ``path`` gets from lookup, store and `db show`."""
    db = FindDb(path, Path(path).parent / "none.jsonl")
    return {"lookup": _logged(db.lookup, "dev", KEY),
            "store": _logged(db.store, "dev", KEY, [Record("b.Y", "b", 1.0, 0)]),
            "show": _cli(path, "db", "show")}


def _stored(path, hold_open=False):
    db = FindDb(path)
    db.store("dev", KEY, [Record("a.X", "a", 2.0, 0)])
    if hold_open:   # a live writer: the record is in the WAL, beside root-owned -wal and -shm
        conn = sqlite3.connect(path)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
        return conn
    return None


def _check_read_only(got):
    assert not isinstance(got["lookup"][0], Exception), got["lookup"]
    assert [r.solver for r in got["lookup"][0]] == ["a.X"]
    code, out, err = got["show"]
    assert code == 0 and "a.X" in out, err
    error = got["store"][0]
    assert isinstance(error, DatabaseError), repr(error)
    assert "read-only" in str(error) and "db.sqlite" in str(error)


def test_reads_work_in_a_read_only_directory(
        world_dir, as_other_user):  # noqa: F811 - fixtures
    """A hit and `db show` read a db whose directory (and file) the user cannot write; store
    raises DatabaseError saying it is read-only (the store's own cases: tests/db/test_store.py).
    Simulated for real: root's tests drop to uid 65534 in a worker process, so the directory's
    0555 mode is enforced by the kernel."""
    path = world_dir / "db.sqlite"
    _stored(path)
    world_dir.chmod(0o555)
    _check_read_only(as_other_user(_read_and_write, path))


@pytest.mark.parametrize("live_writer", [False, True])
def test_reads_work_from_a_read_only_file(
        world_dir, as_other_user, live_writer):  # noqa: F811 - fixtures
    """A db file the user cannot write, in a directory it can: a hit and `db show` see its
    records, also the latest one still in another user's WAL (a live writer: -wal and -shm owned
    by root, 0644); store raises DatabaseError.  Simulated as above (the worker runs as uid
    65534)."""
    path = world_dir / "db.sqlite"
    world_dir.chmod(0o777)
    writer = _stored(path, hold_open=live_writer)
    path.chmod(0o444)
    try:
        _check_read_only(as_other_user(_read_and_write, path))
    finally:
        if writer:
            writer.close()


def test_a_missing_db_in_a_read_only_directory_reads_as_empty(
        world_dir, as_other_user):  # noqa: F811 - fixtures
    """No db file and no right to create one: lookups fall through to the system db, `db show`
    lists nothing, store raises DatabaseError.  Simulated as above (uid 65534, directory 0555)."""
    (world_dir / "system.jsonl").write_text(
        f'{{"device": "dev", "problem": "{KEY}", "solver": "s.A", "family": "s", "time_ms": 5}}\n')
    world_dir.chmod(0o555)
    got = as_other_user(_missing_db, world_dir)
    assert got["lookup"] == [("s.A", "system")]
    assert isinstance(got["store"], DatabaseError) and "read-only" in str(got["store"])
    assert got["show"][0] == 0


def _missing_db(directory):
    db = FindDb(directory / "db.sqlite", directory / "system.jsonl")
    return {"lookup": [(r.solver, r.source) for r in db.lookup("dev", KEY)],
            "store": _logged(db.store, "dev", KEY, [])[0],
            "show": _cli(directory / "db.sqlite", "db", "show")}


def test_corrupt_db_that_cannot_be_moved_aside_says_so(
        world_dir, as_other_user):  # noqa: F811 - fixtures
    """A corrupt db in a directory the user cannot write: lookup and store raise DatabaseError
    saying it is corrupt, and `db show` exits 1 saying so.  Simulated as above (uid 65534,
    directory 0555)."""
    path = world_dir / "db.sqlite"
    path.write_bytes(b"this is not sqlite" * 100)
    world_dir.chmod(0o555)
    got = as_other_user(_read_and_write, path)
    for action in ("lookup", "store"):
        error, logged = got[action]
        assert isinstance(error, DatabaseError), repr(error)
        assert "corrupt" in str(error) and str(path) in str(error)
        assert "cannot be moved aside" in logged
    assert got["show"][0] == 1 and "corrupt" in got["show"][2]


@pytest.mark.parametrize("tail", ["db.sqlite", "sub/db.sqlite"])
def test_db_path_under_a_file_is_one_line_of_db_show(tmp_path, monkeypatch, capsys, tail):
    """CONVSOLVE_USER_DB_PATH below an existing file: lookup raises DatabaseError naming the
    path, and `convsolve db show` prints one line and exits 1."""
    (tmp_path / "file").write_text("")
    path = tmp_path / "file" / tail
    with pytest.raises(DatabaseError, match=re.escape(str(path))):
        FindDb(path).lookup("dev", KEY)
    monkeypatch.setenv("CONVSOLVE_USER_DB_PATH", str(path))
    assert main(["db", "show"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("convsolve: error: find-db") and str(path) in err
    assert err.count("\n") == 1

# }}}


def test_db_show_lists_failure_records(tmp_path, monkeypatch, capsys):
    """`convsolve db show` lists failed solvers (time None) with their reason, as text and JSON."""
    monkeypatch.setenv("CONVSOLVE_USER_DB_PATH", str(tmp_path / "db.sqlite"))
    FindDb().store("dev", KEY, [Record("a.X", "a", 1.5, 0),
                                Record("b.Y", "b", None, 0, failure="build failed: no\nlog")])
    assert main(["db", "show"]) == 0
    out = capsys.readouterr().out
    assert "1.5000" in out and "failed: build failed: no" in out and "b.Y" in out
    assert main(["db", "show", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["failure"] for r in rows] == [None, "build failed: no\nlog"]


def test_schema_2_records_are_copied_and_a_bad_old_file_is_skipped(tmp_path, caplog):
    """A new db copies the records of find_db_v2.sqlite beside it; an old file that is not a
    database is warned about and skipped, and does not make the new db look corrupt."""
    old = sqlite3.connect(tmp_path / "find_db_v2.sqlite")
    old.execute("CREATE TABLE find_v2 (device TEXT NOT NULL, problem TEXT NOT NULL, solver TEXT"
                " NOT NULL, algorithm TEXT NOT NULL, time_ms REAL, workspace INTEGER NOT NULL,"
                " failure TEXT, updated REAL NOT NULL, PRIMARY KEY (device, problem, solver))")
    old.execute(f"INSERT INTO find_v2 VALUES ('dev', '{KEY}', 'a.X', 'a', 1.0, 0, NULL, 0)")
    old.commit()
    old.close()
    assert [r.family for r in FindDb(tmp_path / "find_db_v3.sqlite").lookup("dev", KEY)] == ["a"]
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "find_db_v2.sqlite").write_bytes(b"not sqlite" * 100)
    db = FindDb(tmp_path / "bad" / "find_db_v3.sqlite")
    db.store("dev", KEY, [Record("b.Y", "b", 1.0, 0)])
    assert [r.solver for r in db.lookup("dev", KEY)] == ["b.Y"]
    assert "not copied" in caplog.text and "is corrupt" not in caplog.text
