"""The client of a run, in process: jobs run, their rows merged, done jobs skipped on resume,
failed jobs named, a job that keeps ending its process failed after a bound."""
import pytest
from convsolve.db.find_db import FindDb
from convsolve.db.journal import Journal
from convsolve.db.perf_db import PerfDb
from convsolve.problem import Problem
from convsolve.scale import InProcess, drive, job
from convsolve.scale.drive import MAX_ATTEMPTS
from convsolve.solvers import registry as plugins

TUNE = "convsolve.cli.tune:tune_job"
PROBLEMS = [Problem.conv2d((1, 2, 5, 4), (3, 2, 3, 3), padding=1),
            Problem.conv2d((2, 4, 6, 6), (4, 4, 1, 1))]


@pytest.fixture
def tunable(monkeypatch):
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,cs_tunable")
    plugins.reset()


def _jobs(handle):
    return [job(TUNE, p, handle.db_key, f"p{i}", budget=[2, 8.0, 8], strategy="exhaustive")
            for i, p in enumerate(PROBLEMS)]


def test_runs_jobs_records_them_and_skips_them_when_done(tunable, handle):
    """Each job's value comes back, its rows are in the user dbs (both tunable configs tried,
    the find-db ranking of both solvers), and a second run skips every job with the same value."""
    jobs = _jobs(handle)
    first = drive(InProcess(handle), jobs, quiet=True)
    assert [j for j, _ in first.results] == jobs and not first.failed
    assert {r["problem"] for r in FindDb().rows()} == {p.key() for p in PROBLEMS}
    assert {(r["problem"], r["solver"]) for r in FindDb().rows()} == {
        (p.key(), s) for p in PROBLEMS for s in ("direct.NaiveFwd", "tunable.Spin")}
    spins = [r for r in PerfDb().rows() if r["solver"] == "tunable.Spin"]
    assert len(spins) == 2 * len(PROBLEMS)
    rows = FindDb().rows()
    again = drive(InProcess(handle), jobs, quiet=True)
    assert not again.results and [j for j, _ in again.skipped] == jobs
    assert [v for _, v in again.skipped] == [list(r.value) for _, r in first.results]
    assert FindDb().rows() == rows and "0 done, 2 skipped" in again.text()


def test_a_run_cut_short_resumes_with_the_jobs_not_done(tunable, handle):
    """A client stopped (Ctrl-C) after the second job's records were merged but before it was
    marked done leaves it running in the journal; the next run does only that one again, and
    the dbs hold each record once."""
    jobs, seen = _jobs(handle), []

    def stop(job, result):
        seen.append(job)
        if len(seen) == 2:
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        drive(InProcess(handle), jobs, stop, quiet=True)
    entries = Journal().entries()
    assert [entries[j.id].state for j in jobs] == ["done", "running"]
    resumed = drive(InProcess(handle), jobs, quiet=True)
    assert [j for j, _ in resumed.results] == jobs[1:]
    assert [j for j, _ in resumed.skipped] == jobs[:1]
    keys = [(r["device"], r["problem"], r["solver"]) for r in FindDb().rows()]
    assert len(keys) == len(set(keys)) == 2 * len(PROBLEMS)


def test_a_job_whose_runner_raises_is_failed_and_tried_again(handle):
    """A runner's error is the job's result (its first line), named in the summary; the journal
    forgets the job, so the next run tries it again."""
    bad = job("convsolve.no_such_module:run", PROBLEMS[0], handle.db_key, "bad")
    summary = drive(InProcess(handle), [bad], quiet=True)
    assert "no_such_module" in summary.failed[bad] and "failed: bad on" in summary.text()
    assert bad.id not in Journal().entries()
    assert drive(InProcess(handle), [bad], quiet=True).results


def test_a_job_that_keeps_ending_its_process_fails_after_the_bound(handle):
    """A job left running by MAX_ATTEMPTS clients that each saw it start (each ended with it)
    fails, named in the summary, instead of ending the next client too; it stays failed."""
    deadly = job("convsolve.no_such_module:run", PROBLEMS[0], handle.db_key, "deadly")
    for _ in range(MAX_ATTEMPTS):
        Journal().mark([deadly.id], "running", started=True)
    summary = drive(InProcess(handle), [deadly], quiet=True)
    assert not summary.results
    assert summary.failed[deadly] == f"its process ended under it {MAX_ATTEMPTS} times"
    assert "deadly" in summary.text() and Journal().entries()[deadly.id].state == "failed"
    assert drive(InProcess(handle), [deadly], quiet=True).failed == summary.failed
    assert drive(InProcess(handle), [deadly], quiet=True, again=True).results   # --retune
