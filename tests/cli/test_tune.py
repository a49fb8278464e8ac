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


def _table(out):
    """{label: (default ms, tuned ms, speedup, winner)} of tune's table."""
    rows = {}
    for line in out.splitlines():
        cells = line.split()
        if cells and cells[0] == "line":
            rows[f"line {cells[1]}"] = tuple(cells[3:7])
    return rows


def test_default_and_tuned_are_timed_in_the_same_run(tmp_path, monkeypatch, capsys):
    """Resumed (nothing searched again), the default config is timed again beside the tuned one,
    not taken from the perf-db (whose default time may come from another run, or machine)."""
    from convsolve import Handle
    from convsolve.db.perf_db import Trial
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_tunable")
    plugins.reset()
    path = tmp_path / "problems.txt"
    path.write_text(f"{KEY}\n")
    PerfDb().store(Handle().db_key, KEY, "tunable.Spin", [
        Trial({"SPIN": 100000, "WRONG": 0}, 1000.0), Trial({"SPIN": 0, "WRONG": 0}, 500.0)])
    assert cli.main(["tune", "--file", str(path), "--quiet"]) == 0
    default_ms, tuned_ms, _, winner = _table(capsys.readouterr().out)["line 1"]
    assert winner == "tunable.Spin" and float(tuned_ms) < float(default_ms) < 1000.0


def test_suite_batch_is_the_one_bench_uses(monkeypatch):
    """Without --batch, tune takes the suite's batch as bench does (tiny: 2), not 8."""
    import argparse

    from convsolve.cli.tune import problems_of
    args = argparse.Namespace(suite="tiny", file=None, batch=None, layers="0", directions="fwd")
    assert [problem.n for _, problem in problems_of(args)] == [2]
    args.batch = 3
    assert [problem.n for _, problem in problems_of(args)] == [3]


def test_ctrl_c_says_how_far_it_got(problems_file, monkeypatch, capsys):
    """Ctrl-C during tune: the table so far, then "interrupted, N of M done; run again to
    resume" and exit 130, not a traceback."""
    from convsolve.cli import tune
    calls = []

    def tune_problem(*args):
        calls.append(args)
        if len(calls) > 1:
            raise KeyboardInterrupt
        return 2.0, 1.0, "tunable.Spin"
    monkeypatch.setattr(tune, "tune_problem", tune_problem)
    try:
        code = cli.main(["tune", "--file", str(problems_file), "--quiet"])
    except KeyboardInterrupt:
        pytest.fail("KeyboardInterrupt escaped convsolve tune")
    out, err = capsys.readouterr()
    assert code == 130 and "line 2" in out and "2.00x" in out and "line 3" not in out
    assert err == "convsolve tune: interrupted, 1 of 2 done; run again to resume\n"


def test_tuning_variables_set_tunes_budget(problems_file, monkeypatch):
    """CONVSOLVE_TUNING_BUDGET_CONFIGS, when set, is tune's budget (docs/environment.md says
    they govern tune); the flag still overrides it."""
    monkeypatch.setenv("CONVSOLVE_TUNING_BUDGET_CONFIGS", "2")
    assert cli.main(["tune", "--file", str(problems_file), "--quiet", "--strategy",
                     "exhaustive"]) == 0
    assert len(_trials()) == 4   # two configs for each of the two problems
    assert cli.main(["tune", "--file", str(problems_file), "--quiet", "--strategy", "exhaustive",
                     "--retune", "--budget-configs", "3"]) == 0
    assert len(_trials()) == 6


def test_a_composites_solver_is_tuned_on_the_problem_it_runs(tmp_path, monkeypatch):
    """An NHWC problem: tunable.Spin (channels-first only) runs it as its composite
    tunable.Spin/nchw, and tune searches Spin's configs on the channels-first problem, the
    perf-db entry the composite builds."""
    from convsolve.engine.layouts import channels_first
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,cs_tunable")
    plugins.reset()
    problem = Problem.conv2d((1, 2, 5, 4), (3, 2, 3, 3), padding=1, layout="NHWC")
    path = tmp_path / "problems.txt"
    path.write_text(f"{problem.key()}\n")
    assert cli.main(["tune", "--file", str(path), "--quiet", "--budget-configs", "2",
                     "--strategy", "exhaustive"]) == 0
    assert {row["problem"] for row in _trials()} == {channels_first(problem).key()}
