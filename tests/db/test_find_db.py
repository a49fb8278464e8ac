"""The find-db: user over system, bad records skipped; corrupt, read-only, locked and unusable
files cost no result and raise only DatabaseError; concurrent writers lose nothing."""
import contextlib
import io
import json
import logging
import multiprocessing
import os
import pickle
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from convsolve.cli import main
from convsolve.db.find_db import FindDb, Record
from convsolve.errors import DatabaseError

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


def test_corrupt_file_is_set_aside_and_rebuilt(tmp_path, caplog):
    """A file that is not a database is moved aside with a warning, and the db works again."""
    path = tmp_path / "db.sqlite"
    path.write_bytes(b"this is not sqlite" * 100)
    db = FindDb(path)
    assert db.lookup("dev", KEY) == []
    db.store("dev", KEY, [Record("a.X", "a", 1.0, 0)])
    assert [r.solver for r in FindDb(path).lookup("dev", KEY)] == ["a.X"]
    assert list(tmp_path.glob("db.sqlite.corrupt-*")) and "is corrupt" in caplog.text


def test_truncated_file_is_set_aside_and_rebuilt(tmp_path):
    """A db cut short mid-file is detected and rebuilt instead of crashing."""
    path = tmp_path / "db.sqlite"
    db = FindDb(path)
    db.store("dev", KEY, [Record(f"a.X{i}", "a", float(i), 0) for i in range(2000)])
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    FindDb._checked.discard(path)   # as a new process would
    fresh = FindDb(path)
    fresh.store("dev", KEY, [Record("b.Y", "b", 1.0, 0)])
    assert [r.solver for r in fresh.lookup("dev", KEY)] == ["b.Y"]


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


# {{{ failures the user must not pay for: read-only, locked, unusable paths

#: The checkout: the unprivileged child may not read it (it may sit in a 0700 directory).
CHECKOUT = Path(__file__).resolve().parents[1]


def _drop_root():
    """As root (the tests' usual case, where chmod stops nothing) become nobody, so that the
    kernel really refuses writes with EACCES; otherwise chmod alone does it."""
    if os.geteuid() == 0:
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)


def _refuse_the_checkout(event, args):
    """Audit hook: any file or listing under CHECKOUT fails, as it does for nobody when the
    checkout is private, wherever the tests run."""
    if event in ("open", "os.listdir", "os.scandir") and isinstance(
            args[0] if args else None, (str, bytes, os.PathLike)):
        path = os.path.abspath(os.fsdecode(args[0]))
        if path == str(CHECKOUT) or path.startswith(str(CHECKOUT) + os.sep):
            raise PermissionError(f"{path}: the unprivileged child may not read the checkout")


def other_user_main():
    """The unprivileged child: unpickle (fn, args) from stdin as root (which imports fn's module,
    and convsolve from the readable copy first on its path), become nobody, refuse the
    checkout, and write fn's pickled result to stdout."""
    fn, args = pickle.loads(sys.stdin.buffer.read())
    _drop_root()
    sys.addaudithook(_refuse_the_checkout)
    out, sys.stdout = sys.stdout.buffer, sys.stderr
    pickle.dump(fn(*args), out)


@pytest.fixture(scope="session")
def readable_convsolve():
    """A copy of the convsolve package in a directory every user can read: the unprivileged
    child imports it, not the checkout's."""
    import convsolve
    base = Path(tempfile.mkdtemp(prefix="convsolve-copy-"))
    shutil.copytree(Path(convsolve.__file__).parent, base / "convsolve",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for item in [base, *base.rglob("*")]:
        item.chmod(0o755 if item.is_dir() else 0o644)
    yield base
    shutil.rmtree(base)


@pytest.fixture
def as_other_user(readable_convsolve):
    """``call(fn, *args)`` runs ``fn`` (a module-level function of a test module) in a child
    process as a user that cannot write read-only files nor read the checkout; its result."""
    path = os.pathsep.join([str(readable_convsolve), *sys.path])

    def call(fn, *args):
        done = subprocess.run(
            [sys.executable, "-c", "import test_find_db; test_find_db.other_user_main()"],
            input=pickle.dumps((fn, args)), capture_output=True, timeout=60,
            cwd=readable_convsolve, env={**os.environ, "PYTHONPATH": path}, check=False)
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        return pickle.loads(done.stdout)
    return call


@pytest.fixture
def world_dir():
    """A fresh directory that nobody (uid 65534) can reach: tmp_path's parents are root-only."""
    path = Path(tempfile.mkdtemp(prefix="convsolve-test-"))
    path.chmod(0o755)
    yield path
    for item in [path, *path.rglob("*")]:
        if item.is_dir():
            item.chmod(0o755)
    shutil.rmtree(path)


def _logged(fn, *args):
    """(fn's result or the exception it raised, the warnings it logged)."""
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger("convsolve")
    logger.addHandler(handler)
    try:
        try:
            result = fn(*args)
        except Exception as exc:   # noqa: BLE001 - handed back to the test to check
            result = exc
        return result, "\n".join(r.getMessage() for r in records)
    finally:
        logger.removeHandler(handler)


def _cli(db_path, *argv):
    """(exit code, stdout, stderr) of ``convsolve *argv`` with the user db at ``db_path``."""
    from convsolve.cli import main
    os.environ["CONVSOLVE_USER_DB_PATH"] = str(db_path)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def _read_and_write(path):
    """What a process that cannot write ``path`` gets from each FindDb method and `db show`."""
    db = FindDb(path, Path(path).parent / "none.jsonl")
    return {"lookup": _logged(db.lookup, "dev", KEY), "rows": _logged(db.rows),
            "store": _logged(db.store, "dev", KEY, [Record("b.Y", "b", 1.0, 0)]),
            "clear": _logged(db.clear), "show": _cli(path, "db", "show")}


def _stored(path, hold_open=False):
    db = FindDb(path)
    db.store("dev", KEY, [Record("a.X", "a", 2.0, 0)])
    if hold_open:   # a live writer: the record is in the WAL, beside root-owned -wal and -shm
        conn = sqlite3.connect(path)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
        return conn
    return None


def _check_read_only(got):
    for action in ("lookup", "rows"):
        assert not isinstance(got[action][0], Exception), got[action]
    assert [r.solver for r in got["lookup"][0]] == ["a.X"]
    assert [r["solver"] for r in got["rows"][0]] == ["a.X"]
    code, out, err = got["show"]
    assert code == 0 and "a.X" in out, err
    for action in ("store", "clear"):
        error = got[action][0]
        assert isinstance(error, DatabaseError), repr(error)
        assert "read-only" in str(error) and "db.sqlite" in str(error)


def test_reads_work_in_a_read_only_directory(world_dir, as_other_user):
    """A hit and `db show` read a db whose directory (and file) the user cannot write; store and
    clear raise DatabaseError saying it is read-only.  Simulated for real: root's tests drop to
    uid 65534 in a worker process, so the directory's 0555 mode is enforced by the kernel."""
    path = world_dir / "db.sqlite"
    _stored(path)
    world_dir.chmod(0o555)
    _check_read_only(as_other_user(_read_and_write, path))


@pytest.mark.parametrize("live_writer", [False, True])
def test_reads_work_from_a_read_only_file(world_dir, as_other_user, live_writer):
    """A db file the user cannot write, in a directory it can: reads see its records, also the
    latest one still in another user's WAL (a live writer: -wal and -shm owned by root, 0644);
    writes raise DatabaseError.  Simulated as above (the worker runs as uid 65534)."""
    path = world_dir / "db.sqlite"
    world_dir.chmod(0o777)
    writer = _stored(path, hold_open=live_writer)
    path.chmod(0o444)
    try:
        _check_read_only(as_other_user(_read_and_write, path))
    finally:
        if writer:
            writer.close()


def test_a_missing_db_in_a_read_only_directory_reads_as_empty(world_dir, as_other_user):
    """No db file and no right to create one: lookups fall through to the system db, `db show`
    lists nothing, store raises DatabaseError.  Simulated as above (uid 65534, directory 0555)."""
    (world_dir / "system.jsonl").write_text(
        f'{{"device": "dev", "problem": "{KEY}", "solver": "s.A", "family": "s", "time_ms": 5}}\n')
    world_dir.chmod(0o555)
    got = as_other_user(_missing_db, world_dir)
    assert got["lookup"] == [("s.A", "system")] and got["rows"] == [] and got["clear"] == 0
    assert isinstance(got["store"], DatabaseError) and "read-only" in str(got["store"])
    assert got["show"][0] == 0


def _missing_db(directory):
    db = FindDb(directory / "db.sqlite", directory / "system.jsonl")
    return {"lookup": [(r.solver, r.source) for r in db.lookup("dev", KEY)], "rows": db.rows(),
            "clear": db.clear(), "store": _logged(db.store, "dev", KEY, [])[0],
            "show": _cli(directory / "db.sqlite", "db", "show")}


def test_store_gives_up_soon_while_another_connection_holds_the_write_lock(tmp_path):
    """With the write lock held (BEGIN EXCLUSIVE), store raises DatabaseError within a few
    seconds (not 30) saying so, and lookups still read through the WAL meanwhile."""
    path = tmp_path / "db.sqlite"
    db = FindDb(path)
    db.store("dev", KEY, [Record("a.X", "a", 2.0, 0)])
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        assert [r.solver for r in db.lookup("dev", KEY)] == ["a.X"]
        start = time.monotonic()
        with pytest.raises(DatabaseError, match="write lock") as caught:
            db.store("dev", KEY, [Record("b.Y", "b", 1.0, 0)])
        assert time.monotonic() - start < 5.0 and str(path) in str(caught.value)
        assert [r.solver for r in db.lookup("dev", KEY)] == ["a.X"]
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    db.store("dev", KEY, [Record("b.Y", "b", 1.0, 0)])
    assert [r.solver for r in db.lookup("dev", KEY)] == ["b.Y"]


def test_corrupt_db_that_cannot_be_moved_aside_says_so(world_dir, as_other_user):
    """A corrupt db in a directory the user cannot write is not reported as moved: a warning says
    it cannot be moved aside and every method raises DatabaseError.  Simulated as above (uid
    65534, directory 0555)."""
    path = world_dir / "db.sqlite"
    path.write_bytes(b"this is not sqlite" * 100)
    world_dir.chmod(0o555)
    got = as_other_user(_read_and_write, path)
    for action in ("lookup", "rows", "store", "clear"):
        error, logged = got[action]
        assert isinstance(error, DatabaseError), repr(error)
        assert "corrupt" in str(error) and str(path) in str(error)
        assert "cannot be moved aside" in logged and "moved to" not in logged
    assert got["show"][0] == 1 and "corrupt" in got["show"][2]
    assert path.read_bytes() == b"this is not sqlite" * 100
    assert sorted(p.name for p in world_dir.iterdir()) == ["db.sqlite"]


@pytest.mark.parametrize("tail", ["db.sqlite", "sub/db.sqlite"])
def test_db_path_under_a_file_is_a_database_error(tmp_path, monkeypatch, capsys, tail):
    """CONVSOLVE_USER_DB_PATH below an existing file: each method raises DatabaseError naming the
    path, and `convsolve db show` prints one line and exits 1."""
    (tmp_path / "file").write_text("")
    path = tmp_path / "file" / tail
    db = FindDb(path)
    for call in (lambda: db.lookup("dev", KEY), db.rows, db.clear,
                 lambda: db.store("dev", KEY, [Record("a.X", "a", 1.0, 0)])):
        with pytest.raises(DatabaseError, match=re.escape(str(path))):
            call()
    monkeypatch.setenv("CONVSOLVE_USER_DB_PATH", str(path))
    assert main(["db", "show"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("convsolve: error: find-db") and str(path) in err
    assert err.count("\n") == 1


def test_db_path_that_is_a_directory_is_a_database_error(tmp_path):
    """CONVSOLVE_USER_DB_PATH naming a directory: DatabaseError naming it, and nothing is made
    beside it."""
    path = tmp_path / "base" / "dir"
    path.mkdir(parents=True)
    db = FindDb(path)
    for call in (lambda: db.lookup("dev", KEY), db.rows, db.clear,
                 lambda: db.store("dev", KEY, [Record("a.X", "a", 1.0, 0)])):
        with pytest.raises(DatabaseError, match=re.escape(str(path))):
            call()
    assert [p.name for p in path.parent.iterdir()] == ["dir"]


@pytest.mark.parametrize("failure", [sqlite3.OperationalError("disk I/O error"),
                                     sqlite3.OperationalError("database or disk is full"),
                                     PermissionError(13, "Permission denied"),
                                     sqlite3.InterfaceError("bad parameter")])
def test_any_sqlite_or_os_failure_is_a_database_error(tmp_path, monkeypatch, failure):
    """Whatever sqlite3 or the OS raises, the methods raise DatabaseError naming the file."""
    path = tmp_path / "db.sqlite"
    FindDb(path).store("dev", KEY, [Record("a.X", "a", 1.0, 0)])

    def broken(*args, **kwargs):
        raise failure
    monkeypatch.setattr(sqlite3, "connect", broken)
    db = FindDb(path)
    for call in (lambda: db.lookup("dev", KEY), db.rows, db.clear,
                 lambda: db.store("dev", KEY, [])):
        with pytest.raises(DatabaseError, match=re.escape(str(path))):
            call()


def test_unreadable_system_db_is_skipped_with_a_warning(tmp_path, caplog):
    """A system db path that cannot be read (here a directory) is warned about and answers
    nothing; lookups still work."""
    db = FindDb(tmp_path / "db.sqlite", tmp_path)
    assert db.lookup("dev", KEY) == []
    assert "system find-db" in caplog.text and str(tmp_path) in caplog.text

# }}}


# {{{ corruption: set aside only what is corrupt

def test_stale_corrupt_verdict_never_moves_a_rebuilt_db(tmp_path, monkeypatch):
    """A process that opened the garbage file before another one set it aside and rebuilt it
    (8 processes starting together) must not move the healthy rebuilt db: the set-aside re-checks
    the file under an exclusive lock.  Simulated: its first connection opens a copy of the garbage
    (what it saw), while the path already holds the rebuilt db with a record."""
    path = tmp_path / "db.sqlite"
    garbage = tmp_path / "seen-by-the-slow-process"
    garbage.write_bytes(b"this is not sqlite" * 100)
    path.write_bytes(garbage.read_bytes())
    FindDb(path).store("dev", KEY, [Record("a.X", "a", 1.0, 0)])   # sets aside, rebuilds
    assert len(list(tmp_path.glob("db.sqlite.corrupt-*"))) == 1
    real_connect, calls = sqlite3.connect, []

    def stale_first(target, *args, **kwargs):
        calls.append(target)
        return real_connect(garbage if len(calls) == 1 else target, *args, **kwargs)
    monkeypatch.setattr(sqlite3, "connect", stale_first)
    FindDb._checked.clear()   # as a new process would
    assert [r.solver for r in FindDb(path).lookup("dev", KEY)] == ["a.X"]
    monkeypatch.undo()
    assert len(list(tmp_path.glob("db.sqlite.corrupt-*"))) == 1
    assert [r.solver for r in FindDb(path).lookup("dev", KEY)] == ["a.X"]

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
