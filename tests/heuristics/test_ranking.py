"""Immediate mode's ranking: the model chosen along the device's keys, unseen solvers placed by
WTI, a broken model file reported once and WTI used, budgeted find timing exactly k, and find on
the calls that follow (engine/trials.py): the numpy API's first call runs the model's pick
without benchmarking, its next calls time the unsure top candidates in turn, and once all are
timed the find-db holds them (the rest as predicted) and the plan runs the fastest."""
import dataclasses
import json
import logging

import convsolve
import numpy as np
import pytest
from convsolve import Problem, reference
from convsolve.db.find_db import FindDb
from convsolve.engine import plan as plan_module
from convsolve.engine import trials
from convsolve.engine.solutions import PREDICTED
from convsolve.heuristics import gbdt, ranking
from convsolve.heuristics.data import Dataset, Record
from convsolve.heuristics.features import DeviceFacts
from convsolve.heuristics.model import RankingModel
from convsolve.testing import device_buffers, fake_device, random_tensors

PROBLEM = Problem.conv2d((1, 8, 9, 9), (8, 8, 3, 3), padding=1)
#: The synthetic device's costs: Im2ColGemm always fastest, Tiled twice it, Fwd four times.
COSTS = {"gemm.Im2ColGemm": 1.0, "direct.Tiled": 2.0, "implicit_gemm.Fwd": 4.0}


def _model(tmp_path, name="m.json.gz"):
    records = [Record(Problem.conv2d((n, c, h, h), (k, c, 3, 3), padding=1),
                      {s: f * n * c * k * h * h * 1e-5 for s, f in COSTS.items()})
               for n in (1, 2) for c in (4, 8, 16) for k in (4, 8) for h in (5, 9, 13)]
    facts = DeviceFacts.from_cl(convsolve.Handle().device)
    model = RankingModel.fit(Dataset(facts, tuple(records)),
                             gbdt.Params(rounds=20, depth=3, min_leaf=1), margin_folds=0)
    model.save(tmp_path / name)
    return tmp_path / name


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """No cached model, an empty user folder, and the installed families' solvers."""
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "gemm,direct,implicit_gemm,fft,winograd")
    ranking.forget()
    monkeypatch.setattr(ranking, "user_dir", lambda: tmp_path / "user")
    yield tmp_path
    ranking.forget()


def test_the_chain_picks_the_most_specific_model(fresh, monkeypatch):
    """The user's model before the shipped one at a key; an exact device before its type."""
    shipped, user = fresh / "shipped", fresh / "user"
    for folder, files in ((shipped, {"cpu": "a.json.gz", "gpu/nvidia": "b.json.gz"}),
                          (user, {"pthread-haswell-Some CPU": "c.json.gz"})):
        folder.mkdir()
        (folder / "index.json").write_text(json.dumps(files))
        for file in files.values():
            _model(folder, file)
    monkeypatch.setattr(ranking, "SHIPPED", shipped)
    loaded = {}
    monkeypatch.setattr(ranking, "_load", lambda path: loaded.setdefault(path.name, object()))
    for kind, expected in (("avx2", "c.json.gz"), ("avx512", "a.json.gz"), ("gpu", "b.json.gz")):
        ranking.forget()
        assert ranking.model_for(fake_device(kind))[0] is loaded[expected]
    ranking.forget()
    other = fake_device("gpu", name="Other GPU", vendor="Other Inc")
    assert ranking.model_for(other) is None   # no key of it in either index


def test_model_ranks_and_unseen_solver_is_placed_by_wti(fresh, handle, monkeypatch):
    """With a model, get_solutions answers 'predicted', in the model's order; a solver it has
    never seen (fft, winograd) is still returned, timed by its WTI against the known ones."""
    monkeypatch.setenv("CONVSOLVE_HEURISTICS", str(_model(fresh)))
    found = convsolve.get_solutions(handle, PROBLEM)
    names = [s.solver for s in found]
    assert {s.source for s in found} == {"predicted"}
    assert names.index("gemm.Im2ColGemm") < names.index("direct.Tiled") \
        < names.index("implicit_gemm.Fwd")
    assert {"fft.Fft2d", "winograd.F2x3"} <= set(names)
    monkeypatch.setenv("CONVSOLVE_HEURISTICS", "0")
    assert {s.source for s in convsolve.get_solutions(handle, PROBLEM)} == {"fallback"}


def test_a_broken_model_is_reported_once_and_wti_ranks(fresh, handle, monkeypatch, caplog):
    bad = fresh / "bad.json.gz"
    bad.write_bytes(_model(fresh).read_bytes()[:300])   # truncated
    monkeypatch.setenv("CONVSOLVE_HEURISTICS", str(bad))
    with caplog.at_level(logging.WARNING, logger="convsolve"):
        for _ in range(3):
            found = convsolve.get_solutions(handle, PROBLEM)
            assert found and {s.source for s in found} == {"fallback"}
    assert sum("bad.json.gz" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.parametrize("limit", [1, 2, "auto"])
def test_budgeted_find_times_k_and_records_the_rest_as_predicted(fresh, handle, monkeypatch,
                                                                 limit):
    monkeypatch.setenv("CONVSOLVE_HEURISTICS", str(_model(fresh)))
    problem = PROBLEM.with_direction("fwd")
    found = convsolve.find(handle, problem, **device_buffers(handle, random_tensors(problem)),
                           mode="HYBRID", limit=limit)
    timed = [s for s in found if s.source == "benchmark"]
    k = ranking.model_for(handle.device)[0].auto_count(
        {s.solver: s.time_ms for s in convsolve.get_solutions(handle, problem)}) \
        if limit == "auto" else limit
    assert len(timed) == k and found[:k] == timed
    assert {s.solver for s in timed} == set(list(COSTS)[:k])   # the model's top k
    assert all(s.source == "predicted" for s in found[k:]) and len(found) > k
    records = {r.solver: r for r in FindDb().records(handle.db_key, problem.key())}
    assert {n for n, r in records.items() if r.failure == PREDICTED} \
        == {s.solver for s in found[k:]}


def test_bad_limit_is_named(fresh, handle, monkeypatch):
    problem = PROBLEM
    bufs = device_buffers(handle, random_tensors(problem))
    with pytest.raises(convsolve.ValidationError, match="limit"):
        convsolve.find(handle, problem, **bufs, limit=0)
    monkeypatch.setenv("CONVSOLVE_FIND_LIMIT", "many")
    with pytest.raises(convsolve.ValidationError, match="CONVSOLVE_FIND_LIMIT"):
        convsolve.find(handle, problem, **bufs)


# {{{ find on the calls that follow

@pytest.fixture
def unsure_model(monkeypatch, tmp_path):
    """The synthetic three-solver model of test_ranking, made to time its top 3 (a wide auto
    margin), with the installed families' solvers."""
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "gemm,direct,implicit_gemm,fft,winograd")
    ranking.forget()
    monkeypatch.setattr(ranking, "user_dir", lambda: tmp_path / "user")
    path = _model(tmp_path)
    dataclasses.replace(RankingModel.load(path), auto_margin=50.0).save(path)
    monkeypatch.setenv("CONVSOLVE_HEURISTICS", str(path))
    yield
    ranking.forget()


def _tensors(seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(PROBLEM.x.shape).astype(np.float32),
            rng.standard_normal(PROBLEM.w.shape).astype(np.float32))


def _records(handle):
    return {r.solver: r for r in FindDb().records(handle.db_key, PROBLEM.key())}


def test_the_first_call_benchmarks_nothing_and_the_next_calls_time_the_top_three(
        unsure_model, handle, monkeypatch):
    x, w = _tensors()
    expected = reference.compute(PROBLEM, x=x, w=w, y=None)
    ran = []
    original = trials.Trials.ran
    monkeypatch.setattr(trials.Trials, "ran",
                        lambda self, name, events: (ran.append(name), original(self, name, events)))
    calls = len(COSTS) * trials.TRIAL_CALLS
    for call in range(calls):
        y = convsolve.conv2d(x, w, padding=1, handle=handle)
        np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4)   # every call's own work
        assert _records(handle) == {}, f"recorded after call {call + 1} of {calls}"
    assert ran == list(COSTS) * trials.TRIAL_CALLS   # the model's order, in turn
    np.testing.assert_allclose(convsolve.conv2d(x, w, padding=1, handle=handle), expected,
                               rtol=1e-4, atol=1e-4)
    records = _records(handle)
    timed = {name for name, r in records.items() if r.failure is None}
    assert timed == set(COSTS) and all(records[n].time_ms > 0 for n in timed)
    assert {r.failure for n, r in records.items() if n not in timed} == {PREDICTED}
    fastest = min(timed, key=lambda n: records[n].time_ms)
    assert handle.best_solver(PROBLEM.key()) == fastest
    assert len(ran) == calls   # no more trials once recorded
    convsolve.conv2d(x, w, padding=1, handle=handle)
    assert len(ran) == calls


def test_the_first_call_ranks_once(unsure_model, handle, monkeypatch):
    """The numpy API's first call of a shape ranks the candidates once: the plan it makes
    takes that ranking (api._plan's found() made it to decide whether to go online)."""
    from convsolve import api
    ranked = []
    original = plan_module.ranked_without_benchmark

    def counting(*args, **kwargs):
        ranked.append(args[1].key())
        return original(*args, **kwargs)
    monkeypatch.setattr(api, "ranked_without_benchmark", counting)
    monkeypatch.setattr(plan_module, "ranked_without_benchmark", counting)
    convsolve.conv2d(*_tensors(2), padding=1, handle=handle)
    assert ranked == [PROBLEM.key()]


def test_a_candidate_that_fails_is_left_out_and_the_call_still_answers(unsure_model, handle,
                                                                       monkeypatch):
    x, w = _tensors(1)
    expected = reference.compute(PROBLEM, x=x, w=w, y=None)
    second = list(COSTS)[1]
    original = plan_module.tuned_invoker

    def failing_build(handle, solver, problem):
        if solver.name == second:
            raise convsolve.BuildError("kernel build failed")
        return original(handle, solver, problem)
    monkeypatch.setattr(plan_module, "tuned_invoker", failing_build)
    for _ in range(len(COSTS) * trials.TRIAL_CALLS + 1):
        np.testing.assert_allclose(convsolve.conv2d(x, w, padding=1, handle=handle), expected,
                                   rtol=1e-4, atol=1e-4)
    records = _records(handle)
    assert {n for n, r in records.items() if r.failure is None} == set(COSTS) - {second}
    assert records[second].failure == PREDICTED


@pytest.mark.parametrize("mode, recorded_after_one", [("FAST", False), ("NORMAL", True)])
def test_other_find_modes_keep_their_meaning(unsure_model, handle, monkeypatch, mode,
                                             recorded_after_one):
    """FAST never times; NORMAL benchmarks every candidate on the first call, as find does."""
    monkeypatch.setenv("CONVSOLVE_FIND_MODE", mode)
    x, w = _tensors(2)
    for _ in range(len(COSTS) * trials.TRIAL_CALLS + 1):
        convsolve.conv2d(x, w, padding=1, handle=handle)
        assert bool(_records(handle)) is recorded_after_one

# }}}
