"""The numerical policy: max_tolerance and deterministic filter solvers by what they declare, in
find, run, the numpy API and explain, and key their own find-db records."""
import convsolve
import numpy as np
import pytest
from convsolve import Problem, ValidationError
from convsolve.cli.explain import explain
from convsolve.db.find_db import FindDb
from convsolve.solvers import registry as plugins
from convsolve.solvers.policy import Policy
from convsolve.testing import device_buffers, random_tensors

PROBLEM = Problem.conv2d((1, 2, 5, 4), (3, 2, 3, 3), padding=1)


@pytest.fixture
def loose(monkeypatch):
    """The direct plugin's naive forward solver made loose (tolerance 1e-3) and
    non-deterministic, so that each policy leaves it out."""
    solver = convsolve.registry().get("direct.NaiveFwd")
    monkeypatch.setattr(solver, "tolerance", 1e-3, raising=False)
    monkeypatch.setattr(solver, "deterministic", False, raising=False)
    return solver


@pytest.mark.parametrize("arguments, reason", [
    ({"max_tolerance": 1e-4}, "its tolerance 0.001 exceeds max_tolerance 0.0001"),
    ({"deterministic": True}, "not deterministic"),
])
def test_a_policy_leaves_out_what_it_excludes_with_the_reason(handle, loose, arguments, reason):
    applicable, skipped = convsolve.registry().candidates(PROBLEM, Policy.resolve(**arguments))
    assert loose not in applicable and reason in skipped["direct.NaiveFwd"]
    buffers = device_buffers(handle, random_tensors(PROBLEM))
    with pytest.raises(convsolve.FindError, match=reason):
        convsolve.find(handle, PROBLEM, **buffers, **arguments)
    with pytest.raises(convsolve.SolverError, match=reason):
        convsolve.run(handle, PROBLEM, "direct.NaiveFwd", **buffers, **arguments)
    x, w = (np.ones(d.shape, np.float32) for d in (PROBLEM.x, PROBLEM.w))
    with pytest.raises(convsolve.FindError):
        convsolve.conv2d(x, w, padding=1, handle=handle, **arguments)


def test_the_environment_sets_the_policy_and_explain_shows_it(handle, loose, monkeypatch):
    monkeypatch.setenv("CONVSOLVE_MAX_TOLERANCE", "1e-4")
    rows = {row["solver"]: row["status"] for row in explain(handle, PROBLEM)}
    assert "exceeds max_tolerance" in rows["direct.NaiveFwd"]
    monkeypatch.setenv("CONVSOLVE_MAX_TOLERANCE", "loose")
    with pytest.raises(ValidationError, match="CONVSOLVE_MAX_TOLERANCE"):
        Policy.resolve()


def test_a_policy_that_is_set_keys_its_own_find_db_records(handle):
    """Rankings made under a policy never answer calls without it, and the other way round."""
    buffers = device_buffers(handle, random_tensors(PROBLEM))
    convsolve.find(handle, PROBLEM, **buffers, max_tolerance=1e-4, deterministic=True)
    keys = {row["problem"] for row in FindDb().rows()}
    assert keys == {PROBLEM.key() + "-tol0.0001-det"}
    assert Policy.resolve().db_key(PROBLEM) == PROBLEM.key()


@pytest.mark.parametrize("arguments", [{"max_tolerance": 0}, {"max_tolerance": "1e-5"},
                                       {"deterministic": "yes"}])
def test_bad_policies_are_refused_by_name(arguments):
    with pytest.raises(ValidationError, match=next(iter(arguments))):
        Policy.resolve(**arguments)


def test_reduced_precision_stays_a_policy_switch(monkeypatch, loose):
    monkeypatch.setattr(loose, "reduced_precision", True, raising=False)
    assert "reduced precision is off" in Policy.resolve().refusal(loose)
    monkeypatch.setenv("CONVSOLVE_ALLOW_REDUCED_PRECISION", "1")
    plugins.reset()
    assert Policy.resolve().refusal(loose) is None
