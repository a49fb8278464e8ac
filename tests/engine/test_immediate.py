"""Immediate mode: solutions from the find-db or the WTI fallback, compile, run by name or family."""
import convsolve
import pytest
from convsolve import Problem
from convsolve.reference import relative_error
from convsolve.testing import (
    FLOAT32_TOLERANCE,
    device_buffers,
    expected_output,
    random_tensors,
    read_output,
)

PROBLEM = Problem.conv2d((1, 4, 5, 7), (4, 2, 2, 3), stride=(1, 2), groups=2,
                         direction="backward-data")


def test_fallback_on_a_miss_then_db_after_find(handle, monkeypatch):
    """A miss ranks by WTI with time 10/WTI ms; after find, solutions come from the db."""
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,cs_fake")
    fallback = convsolve.get_solutions(handle, PROBLEM, max_count=5)
    assert [(s.solver, s.source, s.time_ms) for s in fallback] == [
        ("direct.NaiveBwdData", "fallback", pytest.approx(10 / 0.01))]
    assert convsolve.get_solution_count(handle, PROBLEM) == 1
    buffers = device_buffers(handle, random_tensors(PROBLEM))
    convsolve.find(handle, PROBLEM, **buffers)
    found = convsolve.get_solutions(handle, PROBLEM, max_count=1)
    assert [(s.solver, s.source, s.from_db) for s in found] == [
        ("direct.NaiveBwdData", "find-db", True)]


def test_compile_and_run_solution_by_family_from_the_db(handle):
    """run_solution accepts a family name the find-db ranked, even in a handle that did not find."""
    host = random_tensors(PROBLEM)
    buffers = device_buffers(handle, host)
    convsolve.find(handle, PROBLEM, **buffers)
    handle.forget_rankings()  # the family must come from the db
    assert convsolve.get_solution_workspace_size(handle, PROBLEM, "direct.NaiveBwdData") == 0
    convsolve.compile_solution(handle, PROBLEM, "direct")
    convsolve.run_solution(handle, PROBLEM, "direct", **buffers)
    result = read_output(handle, PROBLEM, buffers)
    assert relative_error(result, expected_output(PROBLEM, host)) < FLOAT32_TOLERANCE


def test_wti_errors_and_unknown_wti_are_left_out(handle, monkeypatch):
    """Solvers with unknown WTI are not in the fallback ranking."""
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,cs_fake")
    names = [s.solver for s in convsolve.get_solutions(handle, PROBLEM.with_direction("fwd"))]
    assert names == ["fake.Good", "fake.Hungry", "fake.BadBuild", "fake.RunFails",
                     "direct.NaiveFwd"]
