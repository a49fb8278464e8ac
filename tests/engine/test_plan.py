"""Plans: resolved once and run at enqueue speed; they notice a switch, a plugin gone and a find
that re-ranked their problem, are shared by run and by threads, and check their buffers as run
does."""
import threading

import numpy as np
import pyopencl as cl
import pytest
from convsolve import Plan, Problem, SolverError, ValidationError, env, find, plan, reference, run
from convsolve.db.find_db import FindDb, Record
from convsolve.engine import plan as plan_module
from convsolve.solvers import registry
from convsolve.testing import (
    FLOAT32_TOLERANCE,
    device_buffers,
    expected_output,
    random_tensors,
    read_output,
)

PROBLEM = Problem.conv2d((2, 3, 7, 6), (4, 3, 3, 3), padding=((1, 0), (0, 1)))


@pytest.fixture
def host():
    return random_tensors(PROBLEM)


def _correct(handle, problem, buffers, host):
    return reference.relative_error(read_output(handle, problem, buffers),
                                    expected_output(problem, host)) < FLOAT32_TOLERANCE


def test_a_plan_runs_its_solver_and_is_the_one_run_uses(handle, host):
    """plan() resolves and builds once; plan.run computes the reference's output; run() with the
    same arguments uses the same plan; the workspace is the solver's."""
    made = plan(handle, PROBLEM, "direct.NaiveFwd")
    assert isinstance(made, Plan) and made is plan(handle, PROBLEM, "direct.NaiveFwd")
    assert (made.solver, made.workspace) == ("direct.NaiveFwd", 0)
    buffers = device_buffers(handle, host)
    cl.wait_for_events(made.run(**buffers))
    assert _correct(handle, PROBLEM, buffers, host)
    assert handle.kept_plan(("direct.NaiveFwd", PROBLEM, None, None), lambda: None) is made


def test_a_plan_resolves_only_when_a_counter_moved(handle, host, monkeypatch):
    """Repeated runs resolve nothing; a watched variable set (even to its default value) makes
    the next run resolve once; an unwatched one does not."""
    made, calls = plan(handle, PROBLEM, "direct.NaiveFwd"), []
    real = plan_module.resolve_solver
    monkeypatch.setattr(plan_module, "resolve_solver", lambda *a: calls.append(1) or real(*a))
    buffers = device_buffers(handle, host)
    for _ in range(3):
        made.run(**buffers)
    assert calls == []
    monkeypatch.setenv("CONVSOLVE_LOG_LEVEL", "")   # not watched
    made.run(**buffers)
    assert calls == []
    monkeypatch.setenv("CONVSOLVE_DEBUG_CONV_DIRECT", "1")
    made.run(**buffers)
    made.run(**buffers)
    assert calls == [1]


def test_a_switch_turning_a_named_solver_off_is_reported_by_the_plan(handle, host, monkeypatch):
    """A plan of a named solver that a switch turns off raises SolverError naming the switch at
    its next run, and runs again once the switch is back."""
    made = plan(handle, PROBLEM, "direct.NaiveFwd")
    buffers = device_buffers(handle, host)
    monkeypatch.setenv("CONVSOLVE_DISABLE_SOLVERS", "direct.NaiveFwd")
    with pytest.raises(SolverError, match="disabled by CONVSOLVE_DISABLE_SOLVERS"):
        made.run(**buffers)
    monkeypatch.delenv("CONVSOLVE_DISABLE_SOLVERS")
    cl.wait_for_events(made.run(**buffers))
    assert _correct(handle, PROBLEM, buffers, host)


def test_a_plan_of_no_solver_follows_the_switches_and_a_plugin_gone(handle, host, monkeypatch):
    """A plan of no solver takes immediate mode's pick and moves to another solver when a switch
    turns its own off or its plugin is no longer loaded; a named solver whose plugin is gone is
    refused saying it is not installed."""
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,cs_fake")
    FindDb().store(handle.db_key, PROBLEM.key(), [Record("fake.Good", "fake", 0.1, 0),
                                                  Record("direct.NaiveFwd", "direct", 1.0, 0)])
    chosen, named = plan(handle, PROBLEM), plan(handle, PROBLEM, "fake.Good")
    assert (chosen.solver, named.solver) == ("fake.Good", "fake.Good")
    buffers = device_buffers(handle, host)
    monkeypatch.setenv("CONVSOLVE_DISABLE_SOLVERS", "fake.*")
    assert chosen.solver == "direct.NaiveFwd"
    monkeypatch.delenv("CONVSOLVE_DISABLE_SOLVERS")
    assert chosen.solver == "fake.Good"
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive")   # the fake plugin disappears
    cl.wait_for_events(chosen.run(**buffers))
    assert chosen.solver == "direct.NaiveFwd" and _correct(handle, PROBLEM, buffers, host)
    with pytest.raises(SolverError, match="no solver 'fake.Good' is installed"):
        named.run(**buffers)
    registry.reset()   # a reload (plugins installed since) moves the registry's counter
    assert chosen.solver == "direct.NaiveFwd"


def test_a_find_that_re_ranks_the_problem_moves_a_plan_of_no_solver(handle, host, monkeypatch):
    """A plan of no solver follows the find-db's record until a find in this process ranks the
    problem anew; then it runs find's fastest."""
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,cs_fake")
    FindDb().store(handle.db_key, PROBLEM.key(), [Record("direct.NaiveFwd", "direct", 0.1, 0),
                                                  Record("fake.Good", "fake", 1.0, 0)])
    chosen = plan(handle, PROBLEM)
    assert chosen.solver == "direct.NaiveFwd"
    buffers = device_buffers(handle, host)
    FindDb().store(handle.db_key, PROBLEM.key(), [Record("fake.Good", "fake", 0.1, 0)])
    assert chosen.solver == "direct.NaiveFwd"   # another writer's record alone moves nothing
    ranked = find(handle, PROBLEM, **buffers, mode="NORMAL")
    assert chosen.solver == ranked[0].solver
    cl.wait_for_events(chosen.run(**buffers))
    assert _correct(handle, PROBLEM, buffers, host)
    monkeypatch.setenv("CONVSOLVE_DISABLE_SOLVERS", ranked[0].solver)   # find's pick turned off
    assert chosen.solver not in (ranked[0].solver, "")
    cl.wait_for_events(chosen.run(**buffers))
    assert _correct(handle, PROBLEM, buffers, host)


def test_threads_sharing_a_plan_each_get_their_own_output(handle):
    """Threads running one plan at once on their own buffers each get their own result."""
    made, failures = plan(handle, PROBLEM, "direct.NaiveFwd"), []

    def worker(seed):
        host = random_tensors(PROBLEM, seed=seed)
        buffers = device_buffers(handle, host)
        for _ in range(5):
            cl.wait_for_events(made.run(**buffers))
            if not _correct(handle, PROBLEM, buffers, host):
                failures.append(seed)
    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_a_plan_checks_its_buffers_as_run_does(handle, host):
    """A buffer too small or of another context gets run's errors from plan.run; so do epilogue
    values given to a bare problem."""
    made, buffers = plan(handle, PROBLEM, "direct.NaiveFwd"), device_buffers(handle, host)
    small = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, 4)
    other = cl.Buffer(cl.Context([handle.device]), cl.mem_flags.READ_WRITE, PROBLEM.y.nbytes)
    for bad in (small, other, np.zeros(PROBLEM.y.shape, np.float32)):
        errors = []
        for call in (made.run, lambda **b: run(handle, PROBLEM, "direct.NaiveFwd", **b)):
            with pytest.raises(ValidationError) as info:
                call(**{**buffers, "y": bad})
            errors.append((info.value.field, str(info.value)))
        assert errors[0] == errors[1]
    with pytest.raises(ValidationError, match="has no epilogue"):
        made.run(**buffers, alpha=2.0)


def test_a_plan_refuses_bad_arguments_when_made(handle):
    """plan() checks the handle, problem, solver and policy before resolving anything."""
    with pytest.raises(ValidationError, match="expected a convsolve.Handle"):
        plan(None, PROBLEM)
    with pytest.raises(ValidationError, match="expected a convsolve.Problem"):
        plan(handle, "conv")
    with pytest.raises(ValidationError, match="expected a solver name"):
        plan(handle, PROBLEM, 3)
    with pytest.raises(ValidationError, match="max_tolerance"):
        plan(handle, PROBLEM, "direct.NaiveFwd", max_tolerance=-1.0)


def test_the_generation_moves_only_when_a_watched_variable_changes(monkeypatch):
    """env.generation stays put while nothing watched changes and moves once per change."""
    first = env.generation()
    assert env.generation() == first
    monkeypatch.setenv("CONVSOLVE_CHECK_NUMERICS", "1")
    second = env.generation()
    assert second == first + 1 and env.generation() == second
    monkeypatch.setenv("CONVSOLVE_LOG_LEVEL", "debug")
    assert env.generation() == second


def test_a_find_that_ranks_as_before_leaves_the_plans_alone(handle, host):
    """A find-db hit that ranks the problem as the last find did moves no counter, so plans
    (and run's) keep what they resolved: find then run in a loop stays at enqueue speed."""
    buffers = device_buffers(handle, host)
    find(handle, PROBLEM, **buffers)
    before = handle.ranking_generation
    find(handle, PROBLEM, **buffers)
    assert handle.ranking_generation == before
