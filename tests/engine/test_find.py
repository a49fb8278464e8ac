"""find: ranking, skip reasons, workspace, find modes, the find-db and remembering families."""
import json
import os
import subprocess
import sys
from pathlib import Path

import convsolve
import pyopencl as cl
import pytest
from convsolve import FindError, FindMode, Problem, ValidationError, find, run
from convsolve.db.find_db import FindDb
from convsolve.engine import benchmark as benchmark_module
from convsolve.reference import relative_error
from convsolve.testing import (
    device_buffers,
    expected_output,
    random_tensors,
)

FAKE_PLUGINS = Path(__file__).parents[1] / "fake_plugins"
PROBLEM = Problem.conv2d((2, 3, 7, 6), (4, 3, 3, 3), padding=((1, 0), (0, 1)))


@pytest.fixture
def fake(monkeypatch):
    """The planted-behaviour solvers of cs_fake, beside the installed plugins."""
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,cs_fake")
    return convsolve.registry()


@pytest.fixture
def buffers(handle):
    return device_buffers(handle, random_tensors(PROBLEM))


def test_find_ranks_records_and_logs_every_skip(handle, fake, buffers, caplog):
    """NORMAL find times what works, skips the rest with reasons, and records all it timed."""
    caplog.set_level("INFO", logger="convsolve")
    results = find(handle, PROBLEM, **buffers, mode="NORMAL")
    names = [r.solver for r in results]
    assert set(names) == {"fake.Good", "fake.NoWti", "direct.NaiveFwd"}
    assert [r.time_ms for r in results] == sorted(r.time_ms for r in results)
    assert all(r.source == "benchmark" and r.time_ms > 0 for r in results)
    assert "skip 'fake.Hungry': needs 1024.0 GiB workspace, 0 B allocated (find allocates at most" in caplog.text
    assert "skip 'fake.BadBuild': failed to build" in caplog.text and "undeclared_name" in caplog.text
    assert "skip 'fake.RunFails': failed to run: planted run failure" in caplog.text
    stored = FindDb().lookup(handle.db_key, PROBLEM.key())
    assert [r.solver for r in stored if not r.failure] == names
    assert sorted(r.solver for r in stored if r.failure) == ["fake.BadBuild", "fake.RunFails"]


def test_find_confirms_its_fastest_candidates(handle, fake, buffers, monkeypatch):
    """After the first pass the fastest candidates within CONFIRM_FACTOR of the best are timed
    again (one sample, as many runs as a sample of their first time holds) and keep the smaller
    time, so one timed in a slow moment of the host can still win; a candidate past the factor
    is timed once."""
    script = [[3.0, 1.0], [2.0, 2.0], [50.0, 50.0]]   # by the order of first timing
    seen, batches = [], []

    def first(invoker, buffers, scratch, budget_ms, cutoff_ms=None, limit_s=None):
        cl.wait_for_events(invoker(buffers, scratch))
        seen.append(invoker)
        return script[len(seen) - 1].pop(0)

    def sample(invoker, buffers, scratch, runs, limit_s=None):
        batches.append(runs)
        return script[seen.index(invoker)].pop(0)
    monkeypatch.setattr(benchmark_module, "time_invoker", first)
    monkeypatch.setattr(benchmark_module, "time_batch", sample)
    results = find(handle, PROBLEM, **buffers, mode="NORMAL")
    assert [r.time_ms for r in results] == [1.0, 2.0, 50.0]
    assert [len(times) for times in script] == [0, 0, 1]   # the slow one timed once
    assert batches == [1, 1]   # 2-3 ms runs: a run a sample
    stored = {r.solver: r.time_ms for r in FindDb().lookup(handle.db_key, PROBLEM.key())}
    assert stored[results[0].solver] == 1.0


def test_isolated_find_confirms_in_the_worker(handle, fake, buffers, monkeypatch):
    """Under CONVSOLVE_FIND_ISOLATION=process the confirmation round asks the worker to time
    each contender alone; one the worker cannot time again keeps its first time (the worker
    stands in: its first pass times three of the fake plugins' candidates)."""
    from convsolve.engine import solutions, worker

    def timed(name, ms):
        return solutions.Solution(name, name.split(".")[0], ms, 0, "benchmark")

    def scripted(handle, problem, solvers, available, skipped, failed, verify, values=None):
        names = [s.name for s in solvers]
        if len(names) > 1:   # the first pass
            first = {"fake.Good": 2.0, "fake.NoWti": 3.0, "direct.NaiveFwd": 50.0}
            return sorted((timed(n, first[n]) for n in names if n in first),
                          key=lambda s: s.time_ms)
        again.append(names[0])
        return [timed(names[0], 1.0)] if names[0] == "fake.NoWti" else []
    again = []
    monkeypatch.setattr(worker, "benchmark", scripted)
    monkeypatch.setenv("CONVSOLVE_FIND_ISOLATION", "process")
    results = find(handle, PROBLEM, **buffers, mode="NORMAL")
    assert [(r.solver, r.time_ms) for r in results] == [
        ("fake.NoWti", 1.0), ("fake.Good", 2.0), ("direct.NaiveFwd", 50.0)]
    assert sorted(again) == ["fake.Good", "fake.NoWti"]


def test_find_request_count_and_argument_errors(handle, buffers):
    """request_count limits the list; bad counts and missing or small buffers are errors."""
    assert len(find(handle, PROBLEM, **buffers, request_count=1)) == 1
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValidationError, match="request_count"):
            find(handle, PROBLEM, **buffers, request_count=bad)
    with pytest.raises(ValidationError, match="invalid y="):
        find(handle, PROBLEM, x=buffers["x"], w=buffers["w"], y=None)
    with pytest.raises(ValidationError, match="y buffer size"):
        find(handle, PROBLEM, x=buffers["x"], w=buffers["w"], y=buffers["w"])
    with pytest.raises(ValidationError, match="find mode"):
        find(handle, PROBLEM, **buffers, mode="SLOW")


def test_find_fails_only_when_nothing_works_and_says_why(handle, monkeypatch, buffers):
    """With every working solver off, FindError lists each solver's skip reason."""
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "direct,cs_fake")
    monkeypatch.setenv("CONVSOLVE_DISABLE_SOLVERS", "fake.Good,fake.NoWti")
    monkeypatch.setenv("CONVSOLVE_DEBUG_CONV_DIRECT", "0")
    with pytest.raises(FindError) as info:
        find(handle, PROBLEM, **buffers, mode="NORMAL")
    message = str(info.value)
    assert "fake.Hungry: needs" in message and "fake.RunFails: failed to run" in message
    assert "direct.*: plugin not loaded: disabled by CONVSOLVE_DEBUG_CONV_DIRECT=0" in message


def test_workspace_given_too_small_skips_solver(handle, fake, buffers, caplog):
    """A caller's workspace buffer bounds the candidates; the skip names both sizes."""
    import pyopencl as cl
    caplog.set_level("INFO", logger="convsolve")
    scratch = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, 1 << 20)
    find(handle, PROBLEM, **buffers, scratch=scratch, mode="NORMAL")
    assert "needs 1024.0 GiB workspace, 1.0 MiB given" in caplog.text


def test_modes_on_hit_and_miss(handle, fake, buffers):
    """DYNAMIC_HYBRID times dynamic solvers on a miss; then FAST and DYNAMIC_HYBRID take the hit,
    HYBRID benchmarks the solvers never tried, and NORMAL benchmarks everything."""
    first = find(handle, PROBLEM, **buffers)            # default mode: DYNAMIC_HYBRID
    assert [r.solver for r in first] == ["direct.NaiveFwd"]  # the only dynamic one
    for mode in ("FAST", "DYNAMIC_HYBRID", 2, "5"):
        hit = find(handle, PROBLEM, **buffers, mode=mode)
        assert [(r.solver, r.source) for r in hit] == [("direct.NaiveFwd", "find-db")]
    hybrid = {r.solver: r.source for r in find(handle, PROBLEM, **buffers, mode="HYBRID")}
    assert hybrid == {"direct.NaiveFwd": "find-db", "fake.Good": "benchmark",
                      "fake.NoWti": "benchmark"}
    normal = find(handle, PROBLEM, **buffers, mode=FindMode.NORMAL)
    assert len(normal) == 3 and all(r.source == "benchmark" for r in normal)
    exhaustive = find(handle, PROBLEM, **buffers, mode="HYBRID", exhaustive=True)
    assert all(r.source == "benchmark" for r in exhaustive)


def test_solvers_installed_after_a_find_are_benchmarked_and_failures_remembered(
        handle, buffers, monkeypatch, caplog):
    """A hit lacking newly installed solvers times just those; build and run failures are
    recorded, so the next find neither rebuilds nor reruns them."""
    caplog.set_level("INFO", logger="convsolve")
    find(handle, PROBLEM, **buffers, mode="HYBRID")     # only direct is installed
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,cs_fake")
    second = {r.solver: r.source for r in find(handle, PROBLEM, **buffers, mode="HYBRID")}
    assert second == {"direct.NaiveFwd": "find-db", "fake.Good": "benchmark",
                      "fake.NoWti": "benchmark"}
    failures = {r.solver: r.failure for r in FindDb().lookup(handle.db_key, PROBLEM.key())
                if r.failure}
    assert set(failures) == {"fake.BadBuild", "fake.RunFails"}
    assert failures["fake.RunFails"] == "failed to run: planted run failure"
    caplog.clear()
    third = find(handle, PROBLEM, **buffers, mode="HYBRID")
    assert {r.source for r in third} == {"find-db"}
    assert "failed to build" not in caplog.text and "failed to run" not in caplog.text


def test_fast_mode_miss_uses_wti_fallback(handle, fake, buffers):
    """FAST on a miss runs nothing and ranks by WTI, leaving unknown WTI out."""
    results = find(handle, PROBLEM, **buffers, mode="FAST")
    assert [r.solver for r in results][:2] == ["fake.Good", "fake.Hungry"]
    assert "fake.NoWti" not in {r.solver for r in results}
    assert all(r.source == "fallback" for r in results)
    assert FindDb().lookup(handle.db_key, PROBLEM.key()) == []


def test_disabled_solver_is_never_used_from_a_db_hit(handle, fake, buffers, monkeypatch):
    """Records naming disabled or uninstalled solvers are skipped on a hit."""
    find(handle, PROBLEM, **buffers, mode="NORMAL")
    monkeypatch.setenv("CONVSOLVE_DISABLE_SOLVERS", "fake.*")
    hit = find(handle, PROBLEM, **buffers, mode="HYBRID")
    assert [r.solver for r in hit] == ["direct.NaiveFwd"]
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive")
    monkeypatch.delenv("CONVSOLVE_DISABLE_SOLVERS")
    assert [r.solver for r in find(handle, PROBLEM, **buffers, mode="FAST")] == ["direct.NaiveFwd"]


def test_compile_only_builds_and_times_nothing(handle, buffers, monkeypatch):
    """CONVSOLVE_DEBUG_COMPILE_ONLY=1: candidates are built, nothing is timed or recorded."""
    monkeypatch.setenv("CONVSOLVE_DEBUG_COMPILE_ONLY", "1")
    assert find(handle, PROBLEM, **buffers, mode="NORMAL") == []
    assert FindDb().lookup(handle.db_key, PROBLEM.key()) == []


def test_zero_batch_find_returns_empty(handle):
    """A zero-batch problem needs no buffers for x and y and finds nothing to do."""
    problem = Problem.conv2d((0, 3, 7, 6), (4, 3, 3, 3))
    w = device_buffers(handle, random_tensors(problem))["w"]
    assert find(handle, problem, x=None, w=w, y=None) == []


def test_find_db_persists_across_processes(tmp_path):
    """A find in one process is a db hit in the next, which benchmarks nothing."""
    script = (
        "import json, convsolve\n"
        "from convsolve.testing import device_buffers, random_tensors\n"
        f"p = convsolve.Problem.from_key({PROBLEM.key()!r})\n"
        "h = convsolve.Handle()\n"
        "r = convsolve.find(h, p, **device_buffers(h, random_tensors(p)))\n"
        "print(json.dumps([(s.solver, s.source) for s in r]))\n")
    env_vars = {**os.environ, "CONVSOLVE_USER_DB_PATH": str(tmp_path / "db.sqlite")}
    outputs = [json.loads(subprocess.run([sys.executable, "-c", script], env=env_vars, check=True,
                                         capture_output=True, text=True).stdout)
               for _ in range(2)]
    assert outputs == [[["direct.NaiveFwd", "benchmark"]], [["direct.NaiveFwd", "find-db"]]]


def test_workspace_limit_bounds_what_find_allocates(handle, buffers, monkeypatch, caplog):
    """CONVSOLVE_WORKSPACE_LIMIT caps find's own allocation; larger needs are skipped."""
    caplog.set_level("INFO", logger="convsolve")
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,cs_fake")
    monkeypatch.setenv("CONVSOLVE_WORKSPACE_LIMIT", "64K")
    find(handle, PROBLEM, **buffers, mode="NORMAL")
    assert "0 B allocated (find allocates at most 64.0 KiB: CONVSOLVE_WORKSPACE_LIMIT" in caplog.text


def test_serial_build_and_info_logging_in_a_fresh_process(tmp_path):
    """CONVSOLVE_COMPILE_PARALLEL_LEVEL=1 builds serially; CONVSOLVE_LOG_LEVEL=INFO logs skips."""
    script = (
        "import convsolve\n"
        "from convsolve.testing import device_buffers, random_tensors\n"
        f"p = convsolve.Problem.from_key({PROBLEM.key()!r})\n"
        "h = convsolve.Handle()\n"
        "print(len(convsolve.find(h, p, **device_buffers(h, random_tensors(p)), mode='NORMAL')))\n")
    env_vars = {**os.environ, "CONVSOLVE_USER_DB_PATH": str(tmp_path / "db.sqlite"),
                "CONVSOLVE_COMPILE_PARALLEL_LEVEL": "1", "CONVSOLVE_LOG_LEVEL": "INFO",
                "CONVSOLVE_PLUGINS": "cs_naive,cs_fake",
                "PYTHONPATH": os.pathsep.join(filter(None, [str(FAKE_PLUGINS),
                                                            os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", script], env=env_vars, check=True,
                          capture_output=True, text=True)
    assert done.stdout.strip() == "3"
    assert "skip 'fake.RunFails': failed to run" in done.stderr


def test_a_db_that_cannot_be_used_never_costs_a_result(handle, buffers, monkeypatch, tmp_path,
                                                        caplog):
    """With the user db unreadable and unwritable (its path under a file), find, run by family,
    immediate mode and the numpy API still answer, each warning about the db."""
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    monkeypatch.setenv("CONVSOLVE_USER_DB_PATH", str(blocker / "db.sqlite"))
    ranked = find(handle, PROBLEM, **buffers, mode="NORMAL")
    assert ranked and "this find's results were not recorded" in caplog.text
    run(handle, PROBLEM, "direct", **buffers)
    assert convsolve.get_solutions(handle, PROBLEM)
    x, w = (random_tensors(PROBLEM)[name] for name in ("x", "w"))
    y = convsolve.conv2d(x, w, padding=((1, 0), (0, 1)), handle=handle)
    assert relative_error(y, expected_output(PROBLEM, {"x": x, "w": w, "y": y})) < 1e-5
    assert "its records are not used" in caplog.text
