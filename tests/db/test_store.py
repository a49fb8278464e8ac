"""The store the dbs share: SqliteDb (upsert, merge, forget; one transaction per write, WAL, no
connection kept; a corrupt file set aside, read-only files read, others' locks waited for a bounded
time; every failure a DatabaseError naming the file) and the JSON-lines format (header, record
lines, comments; the system-db reader)."""
import contextlib
import json
import logging
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
from convsolve import env
from convsolve.db import store
from convsolve.db.find_db import FindDb
from convsolve.db.store import (
    FORMAT,
    FORMAT_VERSION,
    SqliteDb,
    db_lines,
    header,
    line_names,
    line_outcome,
    system_table,
)
from convsolve.errors import DatabaseError

KEY = "fwd-n1-c3-h8-w8-k4-y3-x3-p0.0-q0.0-u1-v1-l1-j1-g1-float32-NCHW"
GARBAGE = b"this is not sqlite" * 100


class Notes(SqliteDb):
    """The smallest SqliteDb: a time or a failure per device, problem and solver."""

    name, table, path_var = "notes-db", "notes_v1", env.USER_DB_PATH
    schema = ("CREATE TABLE IF NOT EXISTS notes_v1 (device TEXT NOT NULL, problem TEXT NOT NULL,"
              " solver TEXT NOT NULL, time_ms REAL, failure TEXT, updated REAL NOT NULL,"
              " PRIMARY KEY (device, problem, solver))")
    key = ("device", "problem", "solver")
    order = "device, problem, solver"


def _row(solver, time_ms=1.0, failure=None, device="dev", problem="p"):
    return {"device": device, "problem": problem, "solver": solver, "time_ms": time_ms,
            "failure": failure}


def _solvers(db):
    return [row["solver"] for row in db.rows()]


def _calls(db):
    """Every public SqliteDb method, called once."""
    return (db.rows, lambda: db.merge([_row("b.Y", 0.5)]), lambda: db.forget("dev", "p"),
            db.clear)


# {{{ records: upsert, merge, forget

def test_upsert_replaces_each_record_with_its_key_and_rows_reads_them_back(tmp_path):
    """_upsert writes rows, each replacing the record with its key (slower or failed, too), and
    says how many; rows() reads every record back in the table's order, without 'updated', from
    another instance as well."""
    db = Notes(tmp_path / "notes.sqlite")
    assert db._upsert([_row("b.Y", 2.0), _row("a.X"), _row("a.X", 3.0, device="other")],
                      only_faster=False) == 3
    assert db._upsert([_row("b.Y", 5.0, "run failed")], only_faster=False) == 1
    assert Notes(db.user_path).rows() == [_row("a.X"), _row("b.Y", 5.0, "run failed"),
                                          _row("a.X", 3.0, device="other")]
    assert db._upsert([], only_faster=False) == 0


def test_a_write_is_one_transaction(tmp_path):
    """A write whose last row cannot be stored raises DatabaseError naming the file and stores
    none of its rows."""
    db = Notes(tmp_path / "notes.sqlite")
    db.merge([_row("a.X")])
    with pytest.raises(DatabaseError, match=re.escape(str(db.user_path))):
        db.merge([_row("b.Y"), _row("c.Z"), _row("d.W", device=None)])   # device is NOT NULL
    assert _solvers(db) == ["a.X"]


def test_merge_never_replaces_a_record_as_fast_or_faster(tmp_path):
    """merge adds new records (failures too) and replaces slower ones and failures, but never a
    record as fast or faster, and a failure replaces nothing; it counts what it wrote."""
    db = Notes(tmp_path / "notes.sqlite")
    db._upsert([_row("fast", 1.0), _row("slow", 5.0), _row("failed", None, "build failed"),
                _row("tie", 2.0), _row("kept", 1.0), _row("failed.twice", None, "build failed")],
               only_faster=False)
    assert db.merge([_row("fast", 3.0), _row("slow", 4.0), _row("failed", 9.0), _row("tie", 2.0),
                     _row("kept", 0.1, "wrong output"), _row("failed.twice", None, "run failed"),
                     _row("new", 7.0), _row("new.failure", None, "no build")]) == 4
    assert {r["solver"]: (r["time_ms"], r["failure"]) for r in db.rows()} == {
        "fast": (1.0, None), "slow": (4.0, None), "failed": (9.0, None), "tie": (2.0, None),
        "kept": (1.0, None), "failed.twice": (None, "build failed"), "new": (7.0, None),
        "new.failure": (None, "no build")}


def test_forget_deletes_one_problem_on_one_device_and_clear_everything(tmp_path):
    """forget deletes the records of one problem on one device and says how many; clear deletes
    every record and says how many there were."""
    db = Notes(tmp_path / "notes.sqlite")
    db.merge([_row("a.X"), _row("b.Y"), _row("a.X", problem="q"), _row("a.X", device="other")])
    assert db.forget("dev", "p") == 2 and db.forget("dev", "p") == 0
    assert [(r["device"], r["problem"]) for r in db.rows()] == [("dev", "q"), ("other", "p")]
    assert db.clear() == 2 and db.rows() == []


def test_the_file_is_in_wal_mode_and_no_call_keeps_it_open(tmp_path):
    """The file is in WAL mode (readers never wait for a writer), and each call opens and closes
    its own connection and lock: between calls none of the db's files is open."""
    fds = Path("/proc/self/fd")
    if not fds.is_dir():
        pytest.skip("needs /proc/self/fd to list open files")
    path = tmp_path / "notes.sqlite"
    db = Notes(path)
    db.merge([_row("a.X")])
    db.rows()
    db.forget("dev", "q")
    opened = set()
    for fd in fds.iterdir():
        with contextlib.suppress(OSError):
            opened.add(os.readlink(fd))
    assert not [name for name in opened if name.startswith(str(path))], opened
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        conn.close()

# }}}


# {{{ corruption: set aside only what is corrupt

def test_a_corrupt_file_is_set_aside_with_a_warning_and_nothing_else_is_lost(tmp_path, caplog):
    """A file that is not a database is renamed to <name>.corrupt-<time>-<pid> (its bytes kept),
    a warning names the db, the file and where it went, and a fresh db takes its place; other
    dbs in its directory are left alone."""
    neighbour = Notes(tmp_path / "other.sqlite")
    neighbour.merge([_row("n.N")])
    path = tmp_path / "notes.sqlite"
    path.write_bytes(GARBAGE)
    db = Notes(path)
    assert db.rows() == []
    [aside] = tmp_path.glob("notes.sqlite.corrupt-*")
    assert re.fullmatch(rf"notes\.sqlite\.corrupt-\d{{8}}-\d{{6}}-{os.getpid()}", aside.name)
    assert aside.read_bytes() == GARBAGE
    assert f"notes-db {path} is corrupt" in caplog.text
    assert f"moved to {aside}; rebuilding it empty" in caplog.text
    db.merge([_row("a.X")])
    assert _solvers(Notes(path)) == ["a.X"] and _solvers(neighbour) == ["n.N"]


def test_a_truncated_file_is_set_aside_and_rebuilt(tmp_path):
    """A db cut short mid-file is detected (quick_check, once per process) and rebuilt instead of
    crashing."""
    path = tmp_path / "notes.sqlite"
    Notes(path).merge([_row(f"a.X{i}", float(i)) for i in range(2000)])
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    SqliteDb._checked.discard(path)   # as a new process would
    fresh = Notes(path)
    fresh.merge([_row("b.Y")])
    assert _solvers(fresh) == ["b.Y"] and list(tmp_path.glob("notes.sqlite.corrupt-*"))


def test_quick_check_runs_once_per_file_and_process(tmp_path, monkeypatch):
    """The first call on a file in a process runs PRAGMA quick_check (it reads the whole file);
    later calls on that file do not."""
    real_connect, checks = sqlite3.connect, []

    def traced(*args, **kwargs):
        conn = real_connect(*args, **kwargs)
        conn.set_trace_callback(lambda sql: checks.append(sql) if "quick_check" in sql else None)
        return conn
    monkeypatch.setattr(sqlite3, "connect", traced)
    db, other = Notes(tmp_path / "notes.sqlite"), Notes(tmp_path / "other.sqlite")
    db.merge([_row("a.X")])
    db.rows()
    db.forget("dev", "q")
    assert len(checks) == 1
    other.rows()
    assert len(checks) == 2


def test_damage_that_only_quick_check_sees_sets_the_file_aside(tmp_path):
    """Damage no query of the table meets (here in a leaf of another table, whose free space the
    header misplaces) is found by the quick_check of a process's first call, which sets the file
    aside."""
    path = tmp_path / "notes.sqlite"
    Notes(path).merge([_row("a.X")])
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE other (v TEXT)")
    conn.executemany("INSERT INTO other VALUES (?)", [("x" * 500,)] * 50)
    conn.commit()
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'other'").fetchone()[0]
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    with open(path, "r+b") as db_file:   # the leaf after the root: its cell content at byte 1
        db_file.seek(root * page_size + 5)
        db_file.write(b"\x00\x01")
    SqliteDb._checked.discard(path)   # as a new process would
    assert Notes(path).rows() == [] and list(tmp_path.glob("notes.sqlite.corrupt-*"))


def test_stale_corrupt_verdict_never_moves_a_rebuilt_db(tmp_path, monkeypatch):
    """A process that opened the garbage file before another one set it aside and rebuilt it
    (8 processes starting together) must not move the healthy rebuilt db: the set-aside re-checks
    the file under an exclusive lock.  Simulated: its first connection opens a copy of the garbage
    (what it saw), while the path already holds the rebuilt db with a record."""
    path = tmp_path / "notes.sqlite"
    garbage = tmp_path / "seen-by-the-slow-process"
    garbage.write_bytes(GARBAGE)
    path.write_bytes(GARBAGE)
    Notes(path).merge([_row("a.X")])   # sets aside, rebuilds
    assert len(list(tmp_path.glob("notes.sqlite.corrupt-*"))) == 1
    real_connect, calls = sqlite3.connect, []

    def stale_first(target, *args, **kwargs):
        calls.append(target)
        return real_connect(garbage if len(calls) == 1 else target, *args, **kwargs)
    monkeypatch.setattr(sqlite3, "connect", stale_first)
    SqliteDb._checked.clear()   # as a new process would
    assert _solvers(Notes(path)) == ["a.X"]
    monkeypatch.undo()
    assert len(list(tmp_path.glob("notes.sqlite.corrupt-*"))) == 1
    assert _solvers(Notes(path)) == ["a.X"]

# }}}


# {{{ what the user cannot write: read-only files and directories

#: The checkout: the unprivileged child may not read it (it may sit in a 0700 directory).
CHECKOUT = Path(__file__).resolve().parents[2]


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
    import convsolve.cli.commands  # noqa: F401 - all of convsolve, imported while it may read
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
            [sys.executable, "-c", "import test_store; test_store.other_user_main()"],
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


def _each_call(path):
    """What a process gets from each SqliteDb method on ``path``: (result or error, warnings)."""
    return dict(zip(("rows", "merge", "forget", "clear"), map(_logged, _calls(Notes(path)))))


def _stored(path, hold_open=False):
    """A db with one record at ``path``; with ``hold_open``, a live connection (returned) whose
    read transaction keeps the record in the WAL (the write's checkpoint cannot copy it past
    that reader), beside root-owned -wal and -shm, not yet in the db file."""
    Notes(path).rows()
    holder = sqlite3.connect(path, isolation_level=None) if hold_open else None
    if holder:
        holder.execute("BEGIN")
        holder.execute("SELECT count(*) FROM sqlite_master").fetchall()
    Notes(path).merge([_row("a.X", 2.0)])
    return holder


def _check_read_only(got, path):
    rows, _ = got["rows"]
    assert not isinstance(rows, Exception), rows
    assert [r["solver"] for r in rows] == ["a.X"]
    for action in ("merge", "forget", "clear"):
        error = got[action][0]
        assert isinstance(error, DatabaseError), repr(error)
        assert str(error).startswith(f"notes-db {path} is read-only")
        assert str(error).endswith("make the file and its directory writable, or set "
                                   "CONVSOLVE_USER_DB_PATH to a writable file")


def test_reads_work_in_a_read_only_directory(world_dir, as_other_user):
    """A db whose directory (and file) the user cannot write is read, the file left as it was;
    merge, forget and clear raise DatabaseError saying it is read-only and what to do.  Simulated
    for real: root's tests drop to uid 65534 in a worker process, so the directory's 0555 mode is
    enforced by the kernel."""
    path = world_dir / "notes.sqlite"
    _stored(path)
    world_dir.chmod(0o555)
    before = path.read_bytes()
    _check_read_only(as_other_user(_each_call, path), path)
    assert path.read_bytes() == before


@pytest.mark.parametrize("live_writer", [False, True])
def test_reads_work_from_a_read_only_file(world_dir, as_other_user, live_writer):
    """A db file the user cannot write, in a directory it can: it is read, also its latest record
    still in the WAL of another user's live connection (-wal and -shm owned by root, 0644), and
    left as it was; writes raise DatabaseError.  Simulated as above (the worker runs as uid
    65534)."""
    path = world_dir / "notes.sqlite"
    world_dir.chmod(0o777)
    writer = _stored(path, hold_open=live_writer)
    path.chmod(0o444)
    before = path.read_bytes()
    if live_writer:   # the record is only in the WAL
        snapshot = sqlite3.connect(f"{path.as_uri()}?immutable=1", uri=True)
        assert snapshot.execute("SELECT count(*) FROM notes_v1").fetchone() == (0,)
        snapshot.close()
    try:
        _check_read_only(as_other_user(_each_call, path), path)
        assert path.read_bytes() == before
    finally:
        if writer:
            writer.close()


def test_a_missing_db_in_a_read_only_directory_reads_as_empty(world_dir, as_other_user):
    """No db file and no right to create one: rows() is empty and clear() has nothing to do,
    merge and forget raise DatabaseError saying it is read-only; nothing is made.  Simulated as
    above (uid 65534, directory 0555)."""
    world_dir.chmod(0o555)
    got = as_other_user(_each_call, world_dir / "notes.sqlite")
    assert got["rows"][0] == [] and got["clear"][0] == 0
    for action in ("merge", "forget"):
        assert isinstance(got[action][0], DatabaseError) and "read-only" in str(got[action][0])
    assert list(world_dir.iterdir()) == []


def test_a_corrupt_db_that_cannot_be_moved_aside_says_so(world_dir, as_other_user):
    """A corrupt db in a directory the user cannot write is not reported as moved: a warning says
    it cannot be moved aside and every method raises DatabaseError saying what to do; the file is
    left as it was.  Simulated as above (uid 65534, directory 0555)."""
    path = world_dir / "notes.sqlite"
    path.write_bytes(GARBAGE)
    world_dir.chmod(0o555)
    got = as_other_user(_each_call, path)
    for action in ("rows", "merge", "forget", "clear"):
        error, logged = got[action]
        assert isinstance(error, DatabaseError), repr(error)
        assert str(error).startswith(f"notes-db {path} is corrupt")
        assert "cannot be moved aside" in str(error) and "CONVSOLVE_USER_DB_PATH" in str(error)
        assert "cannot be moved aside" in logged and "moved to" not in logged
    assert path.read_bytes() == GARBAGE
    assert sorted(p.name for p in world_dir.iterdir()) == ["notes.sqlite"]

# }}}


# {{{ other processes' locks: a bounded wait

_HOLD = ("import fcntl, sys\n"
         "held = [open(path, 'a') for path in sys.argv[2:]]\n"
         "for f in held:\n"
         "    fcntl.flock(f, getattr(fcntl, sys.argv[1]))\n"
         "print('held', flush=True)\n"
         "sys.stdin.read()\n")


@contextlib.contextmanager
def _held(mode, *paths):
    """Another process holding flock ``mode`` ('LOCK_SH' or 'LOCK_EX') on each of ``paths``."""
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, mode, *map(str, paths)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        yield
    finally:
        holder.stdin.close()
        holder.wait(10)


def test_a_write_lock_held_elsewhere_costs_a_bounded_wait(tmp_path, monkeypatch):
    """While another connection holds the write lock, a write waits BUSY_TIMEOUT_S (not SQLite's
    default), then raises DatabaseError naming the file and the wait; reads go on through the
    WAL meanwhile, and writes work again once it is released."""
    monkeypatch.setattr(store, "BUSY_TIMEOUT_S", 0.3)
    path = tmp_path / "notes.sqlite"
    db = Notes(path)
    db.merge([_row("a.X")])
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        assert _solvers(db) == ["a.X"]
        start = time.monotonic()
        with pytest.raises(DatabaseError) as caught:
            db.merge([_row("b.Y")])
        assert time.monotonic() - start >= 0.29   # it waited; the message says for how long
        assert str(caught.value).startswith(
            f"notes-db {path}: cannot write it: another process has held its write lock for "
            "over 0.3 s")
        assert _solvers(db) == ["a.X"]
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    db.merge([_row("b.Y")])
    assert _solvers(db) == ["a.X", "b.Y"]


def test_the_sidecar_lock_held_elsewhere_costs_a_bounded_wait(tmp_path, monkeypatch, caplog):
    """Every call shares <db>.lock, so another process's shared lock costs no wait; while one holds
    it exclusively (as while it sets a corrupt file aside) a call waits BUSY_TIMEOUT_S, then
    raises DatabaseError naming the file, and find's reader warns and answers without it."""
    monkeypatch.setattr(store, "BUSY_TIMEOUT_S", 0.3)
    db = Notes(tmp_path / "notes.sqlite")
    db.merge([_row("a.X")])
    find_db = FindDb(tmp_path / "find.sqlite", tmp_path / "none.jsonl")
    find_db.rows()
    monkeypatch.setattr(store, "BUSY_TIMEOUT_S", 0.0)   # any wait at all would raise now
    with _held("LOCK_SH", f"{db.user_path}.lock"):
        db.merge([_row("b.Y")])
        assert _solvers(db) == ["a.X", "b.Y"]
    monkeypatch.setattr(store, "BUSY_TIMEOUT_S", 0.3)
    with _held("LOCK_EX", f"{db.user_path}.lock", f"{find_db.user_path}.lock"):
        start = time.monotonic()
        with pytest.raises(DatabaseError) as caught:
            db.rows()
        assert time.monotonic() - start >= 0.29   # it waited; the message says for how long
        assert str(caught.value).startswith(
            f"notes-db {db.user_path}: cannot read it: another process has held its write lock "
            "for over 0.3 s")
        assert find_db.records("dev", KEY) == []
        assert f"find-db {find_db.user_path}" in caplog.text
        assert "its records are not used" in caplog.text
    assert _solvers(db) == ["a.X", "b.Y"]

# }}}


# {{{ paths that cannot be a db, and any other failure

@pytest.mark.parametrize("tail", ["notes.sqlite", "sub/notes.sqlite"])
def test_a_db_path_under_a_file_is_a_database_error(tmp_path, tail):
    """A db path below an existing file: each method raises a one-line DatabaseError naming the
    path."""
    (tmp_path / "file").write_text("")
    path = tmp_path / "file" / tail
    for call in _calls(Notes(path)):
        with pytest.raises(DatabaseError, match=re.escape(str(path))) as caught:
            call()
        assert "\n" not in str(caught.value)


def test_a_db_path_that_is_a_directory_is_a_database_error(tmp_path):
    """A db path naming a directory: each method raises DatabaseError naming it, and nothing (no
    lock file) is made beside it."""
    path = tmp_path / "base" / "dir"
    path.mkdir(parents=True)
    for call in _calls(Notes(path)):
        with pytest.raises(DatabaseError, match=re.escape(str(path))):
            call()
    assert [p.name for p in path.parent.iterdir()] == ["dir"]


@pytest.mark.parametrize("failure", [sqlite3.OperationalError("disk I/O error"),
                                     sqlite3.OperationalError("database or disk is full"),
                                     PermissionError(13, "Permission denied"),
                                     sqlite3.InterfaceError("bad parameter")])
def test_any_sqlite_or_os_failure_is_a_database_error(tmp_path, monkeypatch, failure):
    """Whatever sqlite3 or the OS raises, each method raises a one-line DatabaseError naming the
    db, the file and why, and the variable to point elsewhere."""
    path = tmp_path / "notes.sqlite"
    Notes(path).merge([_row("a.X")])

    def broken(*args, **kwargs):
        raise failure
    monkeypatch.setattr(sqlite3, "connect", broken)
    for call in _calls(Notes(path)):
        with pytest.raises(DatabaseError) as caught:
            call()
        message = str(caught.value)
        assert message.startswith(f"notes-db {path}") and str(failure) in message
        assert "CONVSOLVE_USER_DB_PATH" in message and "\n" not in message

# }}}


# {{{ JSON lines: system dbs and exports

def _solver(row):
    return row["solver"]


def _keyed(row):
    return row["device"], row["solver"]


PARSERS = {"find": _solver, "perf": _solver}


def test_the_header_names_the_format_and_its_version():
    """An export's first line is a JSON object naming the format and its version, and db_lines
    takes it as a header, not a record."""
    assert json.loads(header()) == {"format": FORMAT, "version": FORMAT_VERSION}
    assert list(db_lines([header()], "export.jsonl", PARSERS)) == []


def test_record_lines_are_read_by_kind_and_comments_skipped():
    """db_lines gives (line number, kind, parsed item) for each record line of a kind it has a
    parser for ("db" absent means find), counting every line; comments and blank lines are
    skipped, lines of other kinds passed over."""
    lines = [header(), "# exported by hand", "", "   ", '{"solver": "f.A"}',
             '{"db": "perf", "solver": "p.B"}', '{"db": "find", "solver": "f.C"}']
    assert list(db_lines(lines, "here", PARSERS)) == [(5, "find", "f.A"), (6, "perf", "p.B"),
                                                      (7, "find", "f.C")]
    assert list(db_lines(lines, "here", {"perf": _solver})) == [(6, "perf", "p.B")]


def test_a_bad_record_line_is_given_with_its_number_and_why():
    """A line that is not JSON, not an object, of an unknown kind or that its parser refuses comes
    back as (its number, None, the error saying why), and reading goes on."""
    lines = ["not json", "[1, 2]", '{"db": "tuning", "solver": "t.X"}', '{"db": "find"}',
             '{"solver": "f.A"}']
    got = list(db_lines(lines, "here", PARSERS))
    assert [(number, kind) for number, kind, _ in got] == [
        (1, None), (2, None), (3, None), (4, None), (5, "find")]
    errors = [item for _, kind, item in got if kind is None]
    assert isinstance(errors[0], json.JSONDecodeError)
    assert str(errors[1]) == "'[1, 2]' is not a JSON object"
    assert str(errors[2]) == "'db' is 'tuning', not one of find, perf"
    assert isinstance(errors[3], KeyError) and got[4][2] == "f.A"


@pytest.mark.parametrize("bad, message", [
    ({"format": "other-db", "version": 1}, "here line 2: .* is not a convsolve-db header"),
    ({"format": FORMAT, "version": "1"}, "here line 2: .* is not a convsolve-db header"),
    ({"format": FORMAT}, "here line 2: .* is not a convsolve-db header"),
    ({"format": FORMAT, "version": FORMAT_VERSION + 1},
     (f"here is in convsolve-db format version {FORMAT_VERSION + 1}, newer than this "
      f"convsolve reads \\({FORMAT_VERSION}\\); upgrade convsolve to read it")),
])
def test_a_bad_or_newer_header_is_a_database_error(bad, message):
    """A header of another format or without an integer version is a DatabaseError naming the
    file and the line; a newer version one saying to upgrade."""
    lines = ["# exported", json.dumps(bad), '{"solver": "f.A"}']
    with pytest.raises(DatabaseError, match=message):
        list(db_lines(lines, "here", PARSERS))


def test_a_record_line_names_its_solver_and_holds_a_time_or_a_failure():
    """line_names takes device, problem and solver, each a non-empty string; line_outcome a
    failure's reason (its time dropped) or a finite time in ms >= 0."""
    row = {"device": "dev", "problem": KEY, "solver": "s.X", "time_ms": "1.5"}
    assert line_names(row) == ("dev", KEY, "s.X") and line_outcome(row) == (1.5, None)
    assert line_outcome({"time_ms": 3, "failure": "build failed"}) == (None, "build failed")
    assert line_outcome({"time_ms": 0}) == (0.0, None)
    for bad in ({**row, "solver": ""}, {**row, "device": 7}):
        with pytest.raises(ValueError, match="must be non-empty strings"):
            line_names(bad)
    with pytest.raises(KeyError):
        line_names({"device": "dev", "problem": KEY})
    for time_ms in (-1.0, "nan", float("inf"), None, "fast"):
        with pytest.raises(ValueError, match="is not a time in ms, and no failure is given"):
            line_outcome({"time_ms": time_ms})


def test_a_system_db_skips_bad_lines_and_is_read_again_only_when_it_changes(tmp_path, caplog):
    """system_table keys each line of its kind, warns about bad lines by number and skips them,
    and reads the file again only once it has changed."""
    path = tmp_path / "system.jsonl"
    path.write_text(f"{header()}\n" + '{"device": "d", "solver": "s.A"}\n' + "not json\n"
                    + '{"db": "perf", "device": "d", "solver": "p.B"}\n')
    parsed = []

    def parse(row):
        parsed.append(row["solver"])
        return _keyed(row)
    assert system_table(path, "find", parse, "system notes-db") == {"d": ["s.A"]}
    assert f"system notes-db {path} line 3 skipped" in caplog.text
    assert system_table(path, "find", parse, "system notes-db") == {"d": ["s.A"]}
    assert parsed == ["s.A"]
    stamp = path.stat().st_mtime_ns
    path.write_text('{"device": "d", "solver": "s.C"}\n')
    os.utime(path, ns=(stamp + 10 ** 9, stamp + 10 ** 9))
    assert system_table(path, "find", parse, "system notes-db") == {"d": ["s.C"]}


def test_an_unreadable_or_newer_system_db_answers_nothing(tmp_path, caplog):
    """A system db that cannot be read (here a directory) or is of a newer format version is
    warned about, naming it, and answers nothing."""
    assert system_table(tmp_path, "find", _keyed, "system notes-db") == {}
    assert f"system notes-db {tmp_path} cannot be read" in caplog.text
    newer = tmp_path / "newer.jsonl"
    newer.write_text(json.dumps({"format": FORMAT, "version": FORMAT_VERSION + 1}) + "\n"
                     + json.dumps({"device": "d", "problem": KEY, "solver": "s.A"}) + "\n")
    assert system_table(newer, "find", _keyed, "system notes-db") == {}
    assert f"version {FORMAT_VERSION + 1}, newer than this convsolve reads" in caplog.text
    assert "it answers nothing" in caplog.text

# }}}
