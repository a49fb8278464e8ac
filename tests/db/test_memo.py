"""The memo of user-db reads: a repeated read opens no connection and answers what the db would;
this process's writes and other processes' commits (two of the same size in one mtime tick, with
or without a connection keeping the WAL) are seen, as are a corrupt file set aside, a deleted
file and a read-only db; failed reads are not kept."""
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from convsolve.db import memo, transfer
from convsolve.db.find_db import FindDb, Record
from convsolve.db.perf_db import PerfDb, Trial
from test_store import GARBAGE, _logged, as_other_user, readable_convsolve, world_dir  # noqa: F401

KEY = "fwd-n1-c3-h8-w8-k4-y3-x3-p0.0-q0.0-u1-v1-l1-j1-g1-float32-NCHW"
SOLVER = "gemm.Tuned"


@pytest.fixture
def connects(monkeypatch):
    """The sqlite3 connections opened since the test began, as a list that grows."""
    real_connect, opened = sqlite3.connect, []

    def counted(*args, **kwargs):
        opened.append(args[0])
        return real_connect(*args, **kwargs)
    monkeypatch.setattr(sqlite3, "connect", counted)
    return opened


def _dbs(tmp_path):
    """A find-db and a perf-db with records, over a system db with one record of another key."""
    system = tmp_path / "system.jsonl"
    system.write_text(json.dumps({"device": "dev", "problem": "sys", "solver": "s.A",
                                  "family": "s", "time_ms": 5, "workspace": 0}) + "\n")
    find, perf = FindDb(tmp_path / "find.sqlite", system), PerfDb(tmp_path / "perf.sqlite", system)
    find.store("dev", KEY, [Record("a.X", "a", 2.0, 0), Record("b.Y", "b", 1.0, 64),
                            Record("c.Z", "c", None, 0, failure="no build")])
    perf.store("dev", KEY, SOLVER, [Trial({"T": 1}, 3.0), Trial({"T": 2}, 1.0),
                                    Trial({"T": 3}, 1.0), Trial({"T": 4}, None, "wrong")])
    perf.store("dev", "other", SOLVER, [Trial({"T": 2}, 0.5)])
    return find, perf


def _reads(find, perf):
    """Every memoised read, with the keys that hit, miss and fall back to the system db."""
    return {"lookup": find.lookup("dev", KEY), "records": find.records("dev", KEY),
            "miss": find.records("dev", "none"), "system": find.records("dev", "sys"),
            "trials": perf.trials("dev", KEY, SOLVER), "best": perf.best("dev", KEY, SOLVER),
            "tuned": perf.tuned("dev", "none", SOLVER), "winners": perf.winners("dev", SOLVER)}


def test_a_repeated_read_opens_no_connection_and_answers_as_the_db(tmp_path, connects,
                                                                   monkeypatch):
    """A second call of each read (hits, misses, system-db answers) opens no connection and
    returns what an unmemoised read does, in the same order, with the same sources."""
    find, perf = _dbs(tmp_path)
    first = _reads(find, perf)
    opened = len(connects)
    assert _reads(FindDb(find.user_path, find.system_path), perf) == first
    assert len(connects) == opened
    monkeypatch.setattr(memo, "stamp", lambda path: None)   # every read from the db
    assert _reads(find, perf) == first and len(connects) > opened
    assert [r.solver for r in first["lookup"]] == ["b.Y", "a.X", "c.Z"]
    assert first["best"] == Trial({"T": 2}, 1.0) and first["system"][0].source == "system"
    assert first["winners"] == [{"T": 2}] and first["miss"] == [] and first["tuned"] is None


def test_an_answer_handed_out_does_not_change_the_memo(tmp_path):
    """Changing a list or config a read returned leaves the next answer as it was."""
    find, perf = _dbs(tmp_path)
    find.lookup("dev", KEY).clear()
    perf.best("dev", KEY, SOLVER).config["T"] = 99
    perf.trials("dev", KEY, SOLVER)[0].config.clear()
    assert len(find.lookup("dev", KEY)) == 3 and perf.best("dev", KEY, SOLVER).config == {"T": 2}
    assert perf.trials("dev", KEY, SOLVER)[0].config == {"T": 2}


def test_the_system_db_still_answers_misses_as_it_changes(tmp_path):
    """A memoised user-db miss still falls back to the system db, read again when it changes."""
    find, _ = _dbs(tmp_path)
    assert [r.time_ms for r in find.records("dev", "sys")] == [5.0]
    find.system_path.write_text(json.dumps({"device": "dev", "problem": "sys", "solver": "s.A",
                                            "family": "s", "time_ms": 7, "workspace": 0}) + "\n")
    os.utime(find.system_path, ns=(1, 10**18))   # a new mtime, whatever the clock's tick
    assert [r.time_ms for r in find.records("dev", "sys")] == [7.0]


# {{{ this process's writes

def _own_writes(find, perf, tmp_path, monkeypatch):
    """Each write path of the dbs, with what the next reads must then show (the import's dbs
    are the default ones: these)."""
    monkeypatch.setenv("CONVSOLVE_USER_DB_PATH", str(find.user_path))
    monkeypatch.setenv("CONVSOLVE_PERF_DB_PATH", str(perf.user_path))
    export = tmp_path / "export.jsonl"
    export.write_text(transfer.header() + "\n" + json.dumps(
        {"db": "find", "device": "dev", "problem": KEY, "solver": "d.W", "family": "d",
         "time_ms": 0.1, "workspace": 0}) + "\n" + json.dumps(
        {"db": "perf", "device": "dev", "problem": KEY, "solver": SOLVER, "config": {"T": 9},
         "time_ms": 0.05}) + "\n")
    return [
        (lambda: find.store("dev", KEY, [Record("e.V", "e", 4.0, 0)]), ["e.V"], {"T": 2}),
        (lambda: find.keep("dev", KEY, [Record("f.U", "f", 4.0, 0)]), ["f.U"], {"T": 2}),
        (lambda: find.merge([{"device": "dev", "problem": KEY, "solver": "g.T", "family": "g",
                              "time_ms": 1.0, "workspace": 0, "failure": None}]),
         ["g.T", "f.U"], {"T": 2}),
        (lambda: perf.store("dev", KEY, SOLVER, [Trial({"T": 5}, 0.2)]), ["g.T", "f.U"],
         {"T": 5}),
        (lambda: perf.keep("dev", KEY, SOLVER, [Trial({"T": 6}, 0.1)]), ["g.T", "f.U"],
         {"T": 6}),
        (lambda: transfer.import_file(export), ["d.W", "g.T", "f.U"], {"T": 9}),
        (lambda: perf.forget("dev", KEY), ["d.W", "g.T", "f.U"], None),
        (lambda: find.forget("dev", KEY), [], None),
        (lambda: find.store("dev", KEY, [Record("h.S", "h", 4.0, 0)]), ["h.S"], None),
        (lambda: find.clear(), [], None),
    ]


@pytest.mark.parametrize("check", ["as is", "blind"])
def test_each_own_write_is_seen_by_the_next_read(tmp_path, monkeypatch, check):
    """After each write path (store, keep, merge, import, forget, clear, of both dbs) the next
    read answers the new records, also where the stamp could not tell ("blind": a constant
    one), since a write drops this process's memo of its file."""
    find, perf = _dbs(tmp_path)
    if check == "blind":
        monkeypatch.setattr(memo, "stamp", lambda path: "always the same")
    for write, solvers, config in _own_writes(find, perf, tmp_path, monkeypatch):
        _reads(find, perf)   # memoised
        write()
        assert [r.solver for r in find.lookup("dev", KEY)] == solvers
        best = perf.best("dev", KEY, SOLVER)
        assert (best and best.config) == config


def test_every_write_changes_the_stamp_even_in_one_mtime_tick(tmp_path, monkeypatch):
    """Each write path changes memo.stamp (what a memo in any process compares), also when the
    file keeps its size and its mtime is put back (a coarse clock's tick)."""
    find, perf = _dbs(tmp_path)
    for write, _, _ in _own_writes(find, perf, tmp_path, monkeypatch):
        before = {db: (os.stat(db), memo.stamp(db)) for db in (find.user_path, perf.user_path)}
        write()
        changed = []
        for db, (stat, stamp) in before.items():
            os.utime(db, ns=(stat.st_atime_ns, stat.st_mtime_ns))
            changed.append(memo.stamp(db) != stamp)
        assert any(changed), write

# }}}


# {{{ other processes' commits

_WRITER = """
import sys
from convsolve.db.find_db import FindDb, Record
db = FindDb(sys.argv[1])
for line in sys.stdin:
    db.store("dev", sys.argv[2], [Record("a.X", "a", float(line), 0)])
    print("stored", flush=True)
"""


@pytest.mark.parametrize("kept_open", [False, True], ids=["memo-only", "own-connection-too"])
def test_another_process_commits_are_seen_two_in_one_tick(tmp_path, kept_open):
    """A process writing via FindDb: each of its commits is seen by the next memoised read here,
    two of the same size back to back included, with the file's inode, size and mtime (put
    back) the same, so a stat check would miss them.  A connection of this process's own kept
    open on the file meanwhile keeps working: the memo never drops SQLite's locks (closing a
    descriptor of the -shm would, and another process would then delete the live WAL)."""
    path = tmp_path / "find.sqlite"
    db = FindDb(path, tmp_path / "none.jsonl")
    db.store("dev", KEY, [Record("a.X", "a", 1.0, 0)])
    keeper = sqlite3.connect(path) if kept_open else None
    if keeper:
        keeper.execute("SELECT count(*) FROM sqlite_master").fetchall()
    writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(path), KEY], text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert [r.time_ms for r in db.lookup("dev", KEY)] == [1.0]   # memoised
        before = os.stat(path)
        for time_ms in (2.0, 3.0, 4.0):
            writer.stdin.write(f"{time_ms}\n")
            writer.stdin.flush()
            assert writer.stdout.readline() == "stored\n"
            os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
            now = os.stat(path)
            assert (now.st_ino, now.st_size, now.st_mtime_ns) == (
                before.st_ino, before.st_size, before.st_mtime_ns)
            assert [r.time_ms for r in db.lookup("dev", KEY)] == [time_ms]
            assert [r.time_ms for r in db.lookup("dev", KEY)] == [time_ms]
        if keeper:
            assert Path(f"{path}-wal").exists() and Path(f"{path}-shm").exists()
            assert keeper.execute(f"SELECT time_ms FROM {db.table}").fetchall() == [(4.0,)]
    finally:
        writer.stdin.close()
        assert writer.wait(60) == 0
        if keeper:
            keeper.close()


def test_a_file_set_aside_and_rebuilt_elsewhere_is_read_anew(tmp_path, caplog):
    """A memoised file that turns corrupt in place is set aside and read as rebuilt (empty),
    with the warning; one replaced by another process's rebuilt db is read anew."""
    path = tmp_path / "find.sqlite"
    db = FindDb(path, tmp_path / "none.jsonl")
    db.store("dev", KEY, [Record("a.X", "a", 1.0, 0)])
    assert len(db.lookup("dev", KEY)) == 1
    size = path.stat().st_size
    path.write_bytes((GARBAGE * (size // len(GARBAGE) + 1))[:size])
    assert db.lookup("dev", KEY) == [] and "is corrupt" in caplog.text
    assert len(list(tmp_path.glob("find.sqlite.corrupt-*[0-9]"))) == 1   # with its -wal, -shm
    db.store("dev", KEY, [Record("b.Y", "b", 1.0, 0)])
    assert [r.solver for r in db.lookup("dev", KEY)] == ["b.Y"]
    rebuilt = tmp_path / "rebuilt.sqlite"
    FindDb(rebuilt).store("dev", KEY, [Record("c.Z", "c", 1.0, 0)])
    os.replace(rebuilt, path)   # as another process's set-aside and rebuild leave it
    assert [r.solver for r in db.lookup("dev", KEY)] == ["c.Z"]


def test_a_deleted_file_reads_as_empty_then_as_written(tmp_path):
    """A memoised db deleted (with its -wal and -shm) reads as empty, is made again, and later
    writes are read."""
    path = tmp_path / "find.sqlite"
    db = FindDb(path, tmp_path / "none.jsonl")
    db.store("dev", KEY, [Record("a.X", "a", 1.0, 0)])
    assert len(db.lookup("dev", KEY)) == 1
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    assert db.lookup("dev", KEY) == [] and db.lookup("dev", KEY) == []
    FindDb(path).store("dev", KEY, [Record("b.Y", "b", 1.0, 0)])
    assert [r.solver for r in db.lookup("dev", KEY)] == ["b.Y"]


def test_a_db_that_does_not_exist_yet_then_appears(tmp_path):
    """Reads of a db not made yet answer nothing (the system db still answers); a db made later
    by another writer is read."""
    path = tmp_path / "sub" / "find.sqlite"
    db = FindDb(path, tmp_path / "none.jsonl")
    assert db.lookup("dev", KEY) == [] and db.lookup("dev", KEY) == []
    FindDb(path).store("dev", KEY, [Record("b.Y", "b", 1.0, 0)])
    assert [r.solver for r in db.lookup("dev", KEY)] == ["b.Y"]


def _reads_around_a_write(path, talk):
    """As a user that cannot write ``path``: the records read before, again (with the connections
    it opened), and after the owner wrote (``talk``: a folder for the two sides' signals)."""
    real_connect, opened = sqlite3.connect, []
    sqlite3.connect = lambda *args, **kwargs: opened.append(1) or real_connect(*args, **kwargs)
    db = FindDb(path, Path(talk) / "none.jsonl")
    first = [r.time_ms for r in db.lookup("dev", KEY)]
    before = len(opened)
    again = [r.time_ms for r in db.lookup("dev", KEY)]
    repeat_opened = len(opened) - before
    (Path(talk) / "read").touch()
    deadline = time.monotonic() + 30
    while not (Path(talk) / "written").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return first, again, repeat_opened, [r.time_ms for r in db.lookup("dev", KEY)]


@pytest.mark.parametrize("read_only", ["file", "directory"])
def test_a_read_only_db_is_memoised_and_sees_the_owner_write(
        world_dir, as_other_user, read_only):  # noqa: F811 - fixtures
    """A user who cannot write the db (its file, or its directory) reads it and then sees a
    write the owner made meanwhile; a repeat is from the memo without a connection where its
    read-only connection opens (a read-only file), from the db where none does (no -shm, and
    none can be made in a read-only directory).  Simulated for real: the reader runs as uid
    65534 (test_store's as_other_user)."""
    path = world_dir / "find.sqlite"
    talk = Path(tempfile.mkdtemp(prefix="convsolve-talk-"))
    talk.chmod(0o777)
    FindDb(path).store("dev", KEY, [Record("a.X", "a", 1.0, 0)])
    path.chmod(0o444)
    world_dir.chmod(0o555 if read_only == "directory" else 0o777)
    got = []
    reader = threading.Thread(target=lambda: got.append(
        as_other_user(_reads_around_a_write, path, str(talk))))
    reader.start()
    deadline = time.monotonic() + 30
    while not (talk / "read").exists() and reader.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    modes = path.stat().st_mode, world_dir.stat().st_mode
    path.chmod(0o644)   # the owner's write (as root the modes would not stop it anyway)
    world_dir.chmod(0o755)
    FindDb(path).store("dev", KEY, [Record("a.X", "a", 2.0, 0)])
    path.chmod(modes[0])
    world_dir.chmod(modes[1])
    (talk / "written").touch()
    reader.join(60)
    [(first, again, repeat_opened, after)] = got
    assert (first, again, after) == ([1.0], [1.0], [2.0])
    assert (repeat_opened == 0) == (read_only == "file")
    for item in talk.iterdir():
        item.unlink()
    talk.rmdir()

# }}}


# {{{ what is not kept

def test_a_failed_read_is_not_kept_and_warns_each_time(tmp_path, monkeypatch):
    """A user db that cannot be read warns on every records() call (the system db answers), and
    is read again once it can be."""
    find, _ = _dbs(tmp_path)

    def broken(write):
        raise sqlite3.OperationalError("disk I/O error")
    monkeypatch.setattr(find, "_connect", broken)
    for _ in range(2):
        records, logged = _logged(find.records, "dev", KEY)
        assert records == [] and "disk I/O error" in logged and "not used" in logged
    monkeypatch.undo()
    assert len(find.records("dev", KEY)) == 3


def test_where_no_stamp_can_be_taken_the_read_goes_to_the_db(tmp_path):
    """A file that is no database, a directory and a path under a file give no stamp (their
    reads go to the db, which says what is wrong); a missing file has one."""
    path = tmp_path / "x.sqlite"
    assert memo.stamp(path) == ("absent",)
    path.write_bytes(GARBAGE)
    assert memo.stamp(path) is None and memo.stamp(tmp_path) is None
    assert memo.stamp(path / "under") is None


def test_kept_connections_are_bounded_and_a_forked_child_opens_its_own(tmp_path):
    """At most MAX_KEPT files keep a connection; a forked child answers from its own reads,
    never through the parent's connections, and the parent's go on working."""
    paths = [tmp_path / f"db{i}.sqlite" for i in range(memo.MAX_KEPT + 2)]
    for i, path in enumerate(paths):
        FindDb(path).store("dev", KEY, [Record("a.X", "a", float(i), 0)])
        assert [r.time_ms for r in FindDb(path).lookup("dev", KEY)] == [float(i)]
    assert len(memo._kept) <= memo.MAX_KEPT and paths[-1] in memo._kept
    if not hasattr(os, "fork"):
        return
    child = os.fork()
    if child == 0:   # the child: exit status 0 only if it answers right on its own connections
        ok = not memo._kept and [r.time_ms for r in FindDb(paths[-1]).lookup("dev", KEY)] == [
            float(len(paths) - 1)] and memo._kept[paths[-1]][0] not in memo._inherited
        os._exit(0 if ok else 1)
    assert os.waitpid(child, 0)[1] == 0
    FindDb(paths[-1]).store("dev", KEY, [Record("b.Y", "b", 1.0, 0)])
    assert [r.solver for r in FindDb(paths[-1]).lookup("dev", KEY)] == ["b.Y"]


def test_the_memo_of_a_file_is_bounded(tmp_path, monkeypatch):
    """Past MAX_ANSWERS keys, a file's memo starts again instead of growing."""
    monkeypatch.setattr(memo, "MAX_ANSWERS", 2)
    find, _ = _dbs(tmp_path)
    for key in ("a", "b", "c"):
        find.lookup("dev", key)
    assert len(memo._memo[find.user_path][1]) == 1

# }}}
