"""The find-db: user over system, skipping bad records, surviving corrupt files and concurrent writers."""
import multiprocessing
import sqlite3

from convsolve.find_db import FindDb, Record

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
