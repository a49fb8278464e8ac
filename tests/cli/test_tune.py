"""`convsolve tune`: problems from a file, default-vs-tuned table, both dbs filled, resumable."""
import pytest
from convsolve import Problem
from convsolve.cli import commands as cli
from convsolve.db.perf_db import PerfDb
from convsolve.solvers import registry as plugins

KEY = Problem.conv2d((1, 2, 5, 4), (3, 2, 3, 3), padding=1).key()
LINE = "./bin/MIOpenDriver conv -n 1 -c 2 -H 6 -W 5 -k 3 -y 1 -x 1 -F 1"


@pytest.fixture
def problems_file(tmp_path, monkeypatch):
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,cs_tunable")
    plugins.reset()
    path = tmp_path / "problems.txt"
    path.write_text(f"# one key and one MIOpenDriver line\n{KEY}\n{LINE}\n")
    return path


def _trials():
    return [row for row in PerfDb().rows() if row["solver"] == "tunable.Spin"]


def test_tune_prints_default_and_tuned_times_and_resumes(problems_file, capsys):
    assert cli.main(["tune", "--file", str(problems_file), "--quiet", "--budget-configs", "3",
                     "--strategy", "exhaustive"]) == 0
    out = capsys.readouterr().out
    assert "line 2" in out and "line 3" in out and "all" in out and "default (ms)" in out
    first = _trials()
    assert len(first) == 6   # three configs for each of the two problems
    assert cli.main(["tune", "--file", str(problems_file), "--quiet"]) == 0   # resumed
    assert _trials() == first
    assert cli.main(["tune", "--file", str(problems_file), "--quiet", "--retune",
                     "--budget-configs", "4", "--strategy", "exhaustive"]) == 0
    assert len(_trials()) == 8


def test_tune_refuses_a_line_that_is_no_problem(problems_file, capsys):
    problems_file.write_text("not a problem\n")
    assert cli.main(["tune", "--file", str(problems_file), "--quiet"]) == 2
    assert "line 1" in capsys.readouterr().err
