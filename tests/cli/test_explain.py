"""explain: every installed solver's fate for a problem, with its reason, WTI, db record and rank."""
import json
import os

from convsolve import Problem
from convsolve.cli import main
from convsolve.cli.explain import explain
from convsolve.db.find_db import FindDb, Record
from convsolve.testing import device_buffers, random_tensors

PROBLEM = Problem.conv2d((1, 3, 6, 5), (4, 3, 3, 3), padding=1)


def test_explain_names_every_reason(handle, monkeypatch):
    """Disabled (with switch), other direction, not applicable, numerical policy, workspace,
    build and run failures, and ranks with WTI and the db record."""
    import cs_fake
    import cs_wrong
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,cs_fake,cs_wrong")
    monkeypatch.setenv("CONVSOLVE_DISABLE_SOLVERS", "direct.NaiveBwdData")
    monkeypatch.setattr(cs_fake.NoWti, "reduced_precision", True, raising=False)
    monkeypatch.setattr(cs_wrong.Lazy, "is_applicable",
                        cs_wrong.hookimpl(lambda self, problem: problem.groups > 1))
    FindDb().store(handle.db_key, PROBLEM.key(), [Record("direct.NaiveFwd", "direct", 2.5, 0)])
    rows = {r["solver"]: r for r in explain(handle, PROBLEM,
                                            device_buffers(handle, random_tensors(PROBLEM)))}
    assert rows["direct.NaiveBwdData"]["status"] == (
        "disabled by CONVSOLVE_DISABLE_SOLVERS ('direct.NaiveBwdData')")
    assert rows["direct.NaiveBwdWeights"]["status"] == "does not serve FORWARD"
    assert rows["wrong.Lazy"]["status"] == "not applicable"
    assert rows["fake.NoWti"]["status"].startswith("numerical policy: reduced precision is off")
    assert rows["fake.Hungry"]["status"].startswith("needs 1024.0 GiB workspace")
    assert rows["fake.BadBuild"]["status"].startswith("failed to build: building")
    assert "undeclared_name" in rows["fake.BadBuild"]["status"]
    assert rows["fake.RunFails"]["status"] == "failed to run: planted run failure"
    assert {rows["fake.Good"]["status"].splitlines()[0],
            rows["direct.NaiveFwd"]["status"]} == {"rank 1", "rank 2"}
    assert (rows["direct.NaiveFwd"]["db_time_ms"], rows["direct.NaiveFwd"]["db_source"]) == (2.5, "user")
    assert rows["fake.Good"]["wti"] == 0.5 and rows["fake.Hungry"]["workspace"] == 1 << 40
    assert [r.solver for r in FindDb().lookup(handle.db_key, PROBLEM.key())] == ["direct.NaiveFwd"]


def test_explain_command_by_key_without_running(capsys, monkeypatch):
    """`convsolve explain --key K --no-run` reports applicability and the system db record."""
    import os
    system = os.environ["CONVSOLVE_SYSTEM_DB_PATH"]
    from convsolve import Handle
    device = Handle().db_key
    with open(system, "w") as out:
        out.write(json.dumps({"device": device, "problem": PROBLEM.key(), "solver":
                              "direct.NaiveFwd", "family": "direct", "time_ms": 7.0,
                              "workspace": 0}) + "\n")
    monkeypatch.setenv("CONVSOLVE_DISABLE_SOLVERS", "direct.NaiveFwd")
    assert main(["explain", "--key", PROBLEM.key(), "--no-run", "--json"]) == 0
    rows = {r["solver"]: r for r in json.loads(capsys.readouterr().out)["reports"][0]["solvers"]}
    assert rows["direct.NaiveFwd"]["status"] == "disabled by CONVSOLVE_DISABLE_SOLVERS ('direct.NaiveFwd')"
    assert rows["direct.NaiveFwd"]["db_source"] == "system"
    assert main(["explain", "--key", PROBLEM.key(), "--no-run"]) == 0
    assert "7.0000 ms (system db)" in capsys.readouterr().out


def test_a_family_switched_off_is_a_row_saying_so(handle, monkeypatch, capsys):
    """CONVSOLVE_DEBUG_CONV_GEMM=0 keeps the gemm plugin from being imported: explain shows it
    as one row with the switch (its solvers used to vanish), as `convsolve solvers` does."""
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,gemm")
    monkeypatch.setenv("CONVSOLVE_DEBUG_CONV_GEMM", "0")
    rows = {r["solver"]: r for r in explain(handle, PROBLEM)}
    assert rows["gemm.*"]["family"] == "gemm"
    assert rows["gemm.*"]["status"] == "plugin not loaded: disabled by CONVSOLVE_DEBUG_CONV_GEMM=0"
    assert main(["explain", "--key", PROBLEM.key(), "--no-run"]) == 0
    assert "plugin not loaded: disabled by CONVSOLVE_DEBUG_CONV_GEMM=0" in capsys.readouterr().out


def test_a_solver_find_would_not_benchmark_says_why(handle, monkeypatch, capsys):
    """A non-dynamic solver is ranked by explain, which times every applicable solver, but find's
    default mode (DYNAMIC_HYBRID) would not benchmark it: its status says so; other modes do."""
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,cs_fake")
    monkeypatch.setenv("CONVSOLVE_DISABLE_SOLVERS", "fake.Hungry,fake.BadBuild,fake.RunFails")
    rows = {r["solver"]: r for r in explain(handle, PROBLEM,
                                            device_buffers(handle, random_tensors(PROBLEM)))}
    first, why = rows["fake.Good"]["status"].splitlines()
    assert first.startswith("rank ") and why == (
        "find skips it: not dynamic (DYNAMIC_HYBRID benchmarks dynamic solvers only); "
        "CONVSOLVE_FIND_MODE=HYBRID or -s 1 runs it")
    assert rows["direct.NaiveFwd"]["status"].startswith("rank ")
    assert "\n" not in rows["direct.NaiveFwd"]["status"]
    assert main(["explain", "--key", PROBLEM.key(), "--no-run"]) == 0
    assert "    fake.Good: find skips it: not dynamic" in capsys.readouterr().out
    monkeypatch.setenv("CONVSOLVE_FIND_MODE", "HYBRID")
    rows = {r["solver"]: r for r in explain(handle, PROBLEM)}
    assert rows["fake.Good"]["status"] == "applicable (not run)"


def test_explain_explains_a_pasted_miopendriver_line(capsys):
    """`convsolve explain ./bin/MIOpenDriver conv ...` explains: no conv run, no verification."""
    assert main(["explain", "./bin/MIOpenDriver", "conv", "-n", "1", "-c", "3", "-H", "6",
                 "-W", "5", "-k", "4", "-p", "1", "-q", "1", "-F", "1", "--no-run"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(PROBLEM.key()) and "applicable (not run)" in out
    assert "Verifies" not in out and "chosen:" not in out


def test_explain_names_the_erratum_that_dropped_a_solver(handle, monkeypatch, tmp_path, capsys):
    """A solver an erratum excludes on this device is a row saying which file and entry, and
    why; the command prints it too."""
    path = tmp_path / "errata.json"
    path.write_text(json.dumps([{"solver": "direct.NaiveBwd*", "reason": "not this one"},
                                {"solver": "direct.NaiveFwd", "device": handle.device.name,
                                 "kernel": 3, "reason": "wrong on this device"}]))
    monkeypatch.setenv("CONVSOLVE_ERRATA", str(path))
    rows = {r["solver"]: r for r in explain(handle, PROBLEM)}
    assert rows["direct.NaiveFwd"]["status"] == (
        f"excluded by erratum {path}#1: wrong on this device")
    assert rows["direct.NaiveBwdWeights"]["status"] == "does not serve FORWARD"
    monkeypatch.setenv("CONVSOLVE_DEVICE", os.environ.get("CONVSOLVE_TEST_DEVICE", ""))
    assert main(["explain", "--key", PROBLEM.key(), "--no-run"]) == 0
    assert f"excluded by erratum {path}#1: wrong on this device" in capsys.readouterr().out
