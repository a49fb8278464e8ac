"""explain: every installed solver's fate for a problem, with its reason, WTI, db record and rank."""
import json

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
    assert {rows["fake.Good"]["status"], rows["direct.NaiveFwd"]["status"]} == {"rank 1", "rank 2"}
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
