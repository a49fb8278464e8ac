"""`convsolve db export / import`: one versioned JSON-lines file for both dbs; import checks the
device, never replaces a faster local record, skips bad lines by number, refuses a newer format;
the shipped system db is in the same format."""
import json
from importlib import resources
from pathlib import Path

import convsolve
import numpy as np
import pytest
from convsolve import Problem
from convsolve.cli import main
from convsolve.db import find_db, perf_db
from convsolve.db import transfer as db_transfer
from convsolve.db.find_db import FindDb, Record
from convsolve.db.perf_db import PerfDb, Trial
from convsolve.db.store import db_lines
from convsolve.errors import DatabaseError
from convsolve.solvers import registry as plugins
from convsolve.solvers.calls import config_refusal
from convsolve.testing import fake_handle

KEY = "fwd-n1-c3-h8-w8-k4-y3-x3-p0.0-q0.0-u1-v1-l1-j1-g1-float32-NCHW"


def _fill(device="dev"):
    FindDb().store(device, KEY, [Record("a.X", "a", 1.0, 64),
                                 Record("b.Y", "b", None, 0, failure="build failed")])
    PerfDb().store(device, KEY, "a.X", [Trial({"TM": 6, "TN": 16}, 1.0),
                                        Trial({"TM": 1, "TN": 1}, None, "wrong output")])


def _find(kind, solver, time_ms, failure=None, device="dev", **extra):
    row = {"db": kind, "device": device, "problem": KEY, "solver": solver, "time_ms": time_ms,
           "failure": failure, **extra}
    return json.dumps(row) + "\n"


def test_round_trip_of_both_dbs(tmp_path, monkeypatch):
    """Exported, then imported into empty dbs, every record of both dbs comes back as it was."""
    _fill()
    before = FindDb().rows(), PerfDb().rows()
    path = tmp_path / "export.jsonl"
    assert db_transfer.export(path) == {"find": 2, "perf": 2}
    assert json.loads(path.read_text().splitlines()[0]) == {"format": "convsolve-db",
                                                            "version": 1}
    monkeypatch.setenv("CONVSOLVE_USER_DB_PATH", str(tmp_path / "other-find.sqlite"))
    monkeypatch.setenv("CONVSOLVE_PERF_DB_PATH", str(tmp_path / "other-perf.sqlite"))
    report = db_transfer.import_file(path, "dev")
    assert report.code == 0 and report.imported == {"find": 2, "perf": 2} and not report.bad
    assert (FindDb().rows(), PerfDb().rows()) == before
    again = db_transfer.import_file(path, "dev")   # twice changes nothing
    assert again.imported == {"find": 0, "perf": 0} and again.kept == {"find": 2, "perf": 2}


def test_export_one_db_and_one_device(tmp_path):
    """--perf / --find export one db; --device keeps the devices whose key contains it."""
    _fill("gpu/132cu")
    _fill("pthread-skylake/16cu")
    path = tmp_path / "export.jsonl"
    assert db_transfer.export(path, ("perf",), "SKYLAKE") == {"perf": 2}
    rows = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    assert {(r["db"], r["device"]) for r in rows} == {("perf", "pthread-skylake/16cu")}


def test_other_devices_are_refused_unless_forced(tmp_path):
    """Records of another device are refused, the message naming both devices; this device's
    are imported (exit 0); a file with none of this device's exits 1; force imports all."""
    path = tmp_path / "in.jsonl"
    path.write_text(_find("find", "a.X", 1.0, device="devA", family="a")
                    + _find("perf", "a.X", 1.0, device="devB", config={"T": 1}))
    report = db_transfer.import_file(path, "devA")
    assert report.imported == {"find": 1, "perf": 0} and report.refused == {"devB": 1}
    assert report.code == 0
    assert "device 'devB': this machine's device is 'devA'" in report.text()
    assert db_transfer.import_file(path, "devC").code == 1
    forced = db_transfer.import_file(path, None)
    assert forced.imported == {"find": 0, "perf": 1} and not forced.refused
    assert [r["device"] for r in PerfDb().rows()] == ["devB"]


def test_import_never_replaces_a_faster_local_record(tmp_path):
    """Per solver (find-db) and per config (perf-db) the faster record stays; a local failure is
    replaced by an imported measurement, never the other way round."""
    FindDb().store("dev", KEY, [Record("a.X", "a", 1.0, 0), Record("b.Y", "b", 5.0, 0),
                                Record("c.Z", "c", None, 0, failure="build failed")])
    PerfDb().store("dev", KEY, "a.X", [Trial({"T": 1}, 1.0), Trial({"T": 2}, 5.0)])
    path = tmp_path / "in.jsonl"
    path.write_text(_find("find", "a.X", 2.0, family="a") + _find("find", "b.Y", 3.0, family="b")
                    + _find("find", "c.Z", 9.0, family="c")
                    + _find("find", "b.Y", None, "run failed", family="b")
                    + _find("perf", "a.X", 2.0, config={"T": 1})
                    + _find("perf", "a.X", 4.0, config={"T": 2})
                    + _find("perf", "a.X", None, "wrong output", config={"T": 2}))
    report = db_transfer.import_file(path, "dev")
    assert report.imported == {"find": 2, "perf": 1} and report.kept == {"find": 2, "perf": 2}
    assert {r.solver: r.time_ms for r in FindDb().lookup("dev", KEY)} == {
        "a.X": 1.0, "b.Y": 3.0, "c.Z": 9.0}
    assert [(t.config, t.time_ms) for t in PerfDb().trials("dev", KEY, "a.X")] == [
        ({"T": 1}, 1.0), ({"T": 2}, 4.0)]


def test_bad_lines_are_skipped_by_number(tmp_path, capsys):
    """Bad lines are reported with their line number and why, the good ones imported; exit 1."""
    path = tmp_path / "in.jsonl"
    path.write_text('{"format": "convsolve-db", "version": 1}\n'
                    + _find("find", "a.X", 1.0, family="a")
                    + "not json\n"
                    + '{"db": "find", "device": "dev", "problem": "p", "family": "a"}\n'
                    + _find("tuning", "a.X", 1.0)
                    + _find("find", "a.X", -1.0, family="a")
                    + _find("perf", "a.X", 1.0, config=[1, 2])
                    + "[1, 2]\n")
    report = db_transfer.import_file(path, "dev")
    assert [number for number, _ in report.bad] == [3, 4, 5, 6, 7, 8]
    assert report.imported == {"find": 1, "perf": 0} and report.code == 1
    text = report.text()
    assert "line 4 skipped: no 'solver' field" in text and "'db' is 'tuning'" in text
    assert "time_ms -1.0 is not a time" in text
    assert main(["db", "import", str(path), "--force"]) == 1
    assert "line 3 skipped" in capsys.readouterr().out


def test_newer_format_version_is_refused(tmp_path, capsys):
    """A file of a newer format version is refused whole: nothing is imported."""
    path = tmp_path / "in.jsonl"
    path.write_text('{"format": "convsolve-db", "version": 2}\n'
                    + _find("find", "a.X", 1.0, family="a"))
    with pytest.raises(DatabaseError, match="version 2, newer"):
        db_transfer.import_file(path, None)
    assert FindDb().rows() == []
    assert main(["db", "import", str(path), "--force"]) == 1
    assert "newer than this convsolve reads" in capsys.readouterr().err


def _shipped_lines():
    """(path, lines) of the packaged system db."""
    path = Path(str(resources.files("convsolve.db") / "system_db.jsonl"))
    return path, path.read_text().splitlines()


def test_shipped_system_db_parses():
    """The packaged system db is in the export format: a header and no bad line."""
    path, lines = _shipped_lines()
    assert json.loads(lines[0]) == {"format": "convsolve-db", "version": 1}
    parsed = list(db_lines(lines, str(path), {"find": find_db.line_row,
                                              "perf": perf_db.line_row}))
    assert all(kind is not None for _, kind, _ in parsed), parsed


def test_shipped_perf_records_still_fit_their_solvers(monkeypatch):
    """Every perf record the system db ships holds a config its solver (where installed) still
    accepts for its problem on a device of that name (a fake one of its class): a config space
    or check that moves on strands no shipped record, which find would otherwise drop with a
    warning on every use."""
    monkeypatch.delenv("CONVSOLVE_PLUGINS")                  # every installed plugin, not the
    monkeypatch.delenv("CONVSOLVE_DISABLE_PLUGIN_AUTOLOAD")  # core tests' naive solvers alone
    plugins.reset()
    installed = convsolve.registry().solvers
    path, lines = _shipped_lines()
    checked = 0
    for _, _, row in db_lines(lines, str(path), {"perf": perf_db.line_row}):
        if row["solver"] not in installed:
            continue
        name, units = row["device"].rsplit("/", 1)
        kind = ("gpu" if not name.startswith("pthread-")
                else "avx512" if "avx512" in name else "avx2")
        handle = fake_handle(kind, name=name, max_compute_units=int(units.removesuffix("cu")))
        config = json.loads(row["config"])
        assert config_refusal(installed[row["solver"]], Problem.from_key(row["problem"]),
                              handle, config) is None, row
        checked += 1
    if not checked:
        pytest.skip("no plugin of a shipped perf record is installed")


def test_an_export_serves_as_a_system_db(tmp_path):
    """An export, used as the system db as is, answers both dbs' lookups."""
    _fill()
    path = tmp_path / "export.jsonl"
    db_transfer.export(path)
    find = FindDb(tmp_path / "empty-find.sqlite", path)
    assert [(r.solver, r.source) for r in find.lookup("dev", KEY)] == [("a.X", "system"),
                                                                         ("b.Y", "system")]
    best = PerfDb(tmp_path / "empty-perf.sqlite", path).best("dev", KEY, "a.X")
    assert best == Trial({"TM": 6, "TN": 16}, 1.0, None, "system")


def test_db_command_covers_the_perf_db(tmp_path, capsys, handle):
    """`convsolve db path|show|clear --perf` act on the perf-db; export and import (device
    checked against the chosen device) print what they did."""
    _fill(handle.db_key)
    _fill("elsewhere/1cu")
    assert main(["db", "path", "--perf"]) == 0
    assert str(PerfDb().user_path) in capsys.readouterr().out
    assert main(["db", "show", "--perf"]) == 0
    out = capsys.readouterr().out
    assert '{"TM":6,"TN":16}' in out and "failed: wrong output" in out
    path = tmp_path / "export.jsonl"
    assert main(["db", "export", str(path)]) == 0
    assert "exported 4 find-db records, 4 perf-db trials" in capsys.readouterr().out
    assert main(["db", "clear", "--perf"]) == 0 and "removed 4" in capsys.readouterr().out
    assert main(["db", "import", str(path), "--device", handle.name]) == 0
    out = capsys.readouterr().out
    assert "imported from" in out and "2 perf-db trials" in out
    assert "refused 4 records of device 'elsewhere/1cu'" in out and handle.db_key in out
    assert len(PerfDb().rows()) == 2


def test_lines_the_dbs_cannot_hold_are_refused_by_number_and_field(tmp_path):
    """Bad lines naming the field, the good line imported: JSON nested too deeply (it raised
    RecursionError), a workspace SQLite's INTEGER cannot hold (OverflowError), a negative or
    fractional one (imported), a time_ms no float holds, a NUL character (imported), a line over
    MAX_LINE_BYTES (imported whole, then printed by db show)."""
    record = {"db": "find", "device": "dev", "problem": KEY, "solver": "a.X", "family": "a",
              "time_ms": 1.0}
    bad = [("[" * 100_000 + "]" * 100_000, "maximum recursion depth"),
           (dict(record, workspace=10 ** 30), f"workspace {10 ** 30} is not a byte count"),
           (dict(record, workspace=-5), "workspace -5 is not a byte count"),
           (dict(record, workspace=1.5), "workspace 1.5 is not a byte count"),
           (dict(record, workspace=True), "workspace True is not a byte count"),
           (dict(record, time_ms=10 ** 400), "time_ms is larger than any float"),
           (dict(record, problem=KEY + "\0"), "field 'problem' holds a NUL character"),
           ({"db": "perf", "device": "dev", "problem": KEY, "solver": "a.X", "time_ms": 1.0,
             "config": {"T\0": 1}}, "field 'config' holds a NUL character"),
           ('{"db": "find", "device": "dev\0"}', "Invalid control character"),
           (dict(record, failure="x" * 2 ** 20), "longer than 1048576 bytes")]
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join([json.dumps(dict(record, workspace=64))] + [
        line if isinstance(line, str) else json.dumps(line) for line, _ in bad]) + "\n")
    report = db_transfer.import_file(path, "dev")
    assert [number for number, _ in report.bad] == list(range(2, len(bad) + 2))
    for (number, why), (_, expected) in zip(report.bad, bad):
        assert expected in str(why), (number, why)
    assert report.imported == {"find": 1, "perf": 0} and report.code == 1
    assert [(r["problem"], r["workspace"]) for r in FindDb().rows()] == [(KEY, 64)]


def test_a_file_of_random_bytes_is_bad_lines_not_a_missing_file(tmp_path, capsys):
    """Random bytes are lines that are not UTF-8 text, each named (it was 'cannot read ...;
    check the file's name'): nothing is imported, exit 1, no traceback."""
    path = tmp_path / "random.bin"
    path.write_bytes(np.random.default_rng(0).bytes(4096).replace(b"\n", b"\xff\n"))
    report = db_transfer.import_file(path, None)
    assert report.bad and all("not UTF-8 text" in why for _, why in report.bad)
    assert report.imported == {"find": 0, "perf": 0} and report.code == 1
    assert main(["db", "import", str(path), "--force"]) == 1
    out, err = capsys.readouterr()
    assert "line 1 skipped: not UTF-8 text" in out and not err
    with pytest.raises(DatabaseError, match="check the file's name"):
        db_transfer.import_file(tmp_path / "missing.jsonl", None)


def test_records_of_solvers_not_installed_are_imported(tmp_path):
    """A record naming a solver not installed here is imported (docs: find-db lookups skip it
    until its plugin is installed)."""
    path = tmp_path / "in.jsonl"
    path.write_text(_find("find", "gone.Solver", 1.0, family="gone"))
    assert db_transfer.import_file(path, "dev").imported == {"find": 1, "perf": 0}
    assert [r["solver"] for r in FindDb().rows()] == ["gone.Solver"]


def test_an_import_that_fails_halfway_changes_no_db(tmp_path, monkeypatch):
    """When the perf-db cannot be written, the import raises DatabaseError and the find-db keeps
    exactly its records: the find-db's transaction stays open until the perf-db's commits (the
    find-db's imported records were kept before)."""
    FindDb().store("dev", KEY, [Record("a.X", "a", 5.0, 0)])
    before = FindDb().rows()
    path = tmp_path / "in.jsonl"
    path.write_text(_find("find", "a.X", 1.0, family="a") + _find("find", "b.Y", 2.0, family="b")
                    + _find("perf", "a.X", 1.0, config={"T": 1}))
    (tmp_path / "file").write_text("")
    with monkeypatch.context() as patch:   # a perf-db path under a file: no db can be made
        patch.setenv("CONVSOLVE_PERF_DB_PATH", str(tmp_path / "file" / "perf.sqlite"))
        with pytest.raises(DatabaseError, match="perf-db"):
            db_transfer.import_file(path, "dev")
    assert FindDb().rows() == before and PerfDb().rows() == []
    assert db_transfer.import_file(path, "dev").imported == {"find": 2, "perf": 1}


def test_merge_reads_other_machines_sqlite_dbs_without_writing_them(tmp_path, monkeypatch,
                                                                    capsys):
    """`db merge` takes user db files copied from other machines (the find-db's and the
    perf-db's SQLite files) beside exports: their records merge as an import's do (a faster
    local record kept, another device's refused without --force), and the files are left
    byte for byte as they were."""
    _fill("remote/2cu")
    FindDb().store("other/8cu", KEY, [Record("a.X", "a", 9.0, 0)])
    copies = [Path(FindDb().user_path), Path(PerfDb().user_path)]
    before = [path.read_bytes() for path in copies]
    monkeypatch.setenv("CONVSOLVE_USER_DB_PATH", str(tmp_path / "here-find.sqlite"))
    monkeypatch.setenv("CONVSOLVE_PERF_DB_PATH", str(tmp_path / "here-perf.sqlite"))
    FindDb().store("remote/2cu", KEY, [Record("a.X", "a", 0.5, 64)])   # faster here
    assert main(["db", "merge", *map(str, copies), "--force"]) == 0
    out = capsys.readouterr().out
    assert "imported from" in out and "kept the local record" in out
    times = {(r["device"], r["solver"]): r["time_ms"] for r in FindDb().rows()}
    assert times == {("remote/2cu", "a.X"): 0.5, ("remote/2cu", "b.Y"): None,
                     ("other/8cu", "a.X"): 9.0}
    assert len(PerfDb().rows()) == 2
    assert [path.read_bytes() for path in copies] == before
    report = db_transfer.import_file(copies[0], "remote/2cu")   # the device check
    assert report.refused == {"other/8cu": 1}
