"""convsolve.heuristics.evaluate: honest scores beside a baseline, and a refit kept only when it
does no worse on records it did not see."""
import dataclasses

import numpy as np
import pytest
from convsolve.heuristics import (
    Dataset,
    Params,
    RankingModel,
    Record,
    Scores,
    held_out,
    refit,
)
from convsolve.heuristics.evaluate import _outcomes, evaluate
from convsolve.heuristics.split import geometry
from synthetic_corpus import DEVICE, corpus

SMALL = Params(rounds=40, depth=4)


def test_scores_of_hand_made_outcomes():
    """Three problems: a hit, a pick 1.2x off whose runner-up is 1.05x, a 3x miss whose third
    is the best."""
    regrets = np.array([[1.0, 1.0, 1.0], [1.2, 1.05, 1.05], [3.0, 3.0, 1.0]])
    auto = np.array([[1.0, 1], [1.05, 2], [3.0, 1]])
    s = Scores.of(regrets, np.array([1.0, 2.0, 1.0]), auto)
    assert (s.problems, s.within10, s.within25, s.top2, s.top3) == (3, 1 / 3, 2 / 3, 2 / 3, 1.0)
    assert s.auto == pytest.approx(2 / 3) and s.auto_mean_count == pytest.approx(4 / 3)
    assert s.geomean_regret == pytest.approx(3.6 ** (1 / 3)) and s.max_regret == 3.0
    assert s.mean_regret == pytest.approx(5.2 / 3) and s.network_total == pytest.approx(6.4 / 4)
    assert s.p95_regret == pytest.approx(np.percentile([1.0, 1.2, 3.0], 95))


def test_outcomes_rank_timed_solvers_unscored_last():
    """A ranking picks among the timed solvers; one it has no score for comes after the others,
    a scored solver without a time is not a candidate."""
    problem = corpus(1, 1).records[0].problem
    record = Record(problem, {"a": 2.0, "b": 1.0, "c": 4.0}, {"d": "failed"})
    found = _outcomes([record], [{"c": 1.0, "a": 2.0, "d": 0.1}], 0.0)
    assert found.tolist() == [[4.0, 2.0, 1.0, 4.0, 1.0]]
    assert np.isnan(_outcomes([record], [{"a": 1.0}], None)[0, 3:]).all()


def test_evaluate_scores_the_model_and_the_baseline_on_the_same_folds():
    """On the synthetic corpus the model's pick is within 10% on >= 95%; the baseline (always
    fake.B first) scores what fake.B alone does; the breakdowns count every problem once."""
    data = corpus(300, 1)
    report = evaluate(data, folds=3, baseline=lambda p: {"fake.B": 1.0, "fake.A": 2.0},
                      params=SMALL, margin_folds=2)
    model, base = report.model, report.baseline
    assert report.records == 300 and model.overall.within10 >= 0.95
    assert model.overall.auto >= model.overall.within10 and 1 <= model.overall.auto_mean_count <= 2
    b_alone = np.mean([r.times_ms["fake.B"] <= 1.1 * r.best_ms for r in data.records])
    assert base.overall.within10 == pytest.approx(b_alone) and base.overall.auto is None
    assert set(model.direction) == {"fwd", "bwd", "wrw"} and "fake" in model.family
    for part in (model.direction, model.family, base.direction):
        assert sum(s.problems for s in part.values()) == 300
    assert report.to_dict()["model"]["overall"]["within10"] == model.overall.within10


def test_evaluate_trains_beside_records_but_none_of_a_test_folds_geometries(monkeypatch):
    """Another device's records join each fold's training records, all but those of the test
    fold's geometries; only ``dataset``'s records are scored."""
    data, beside = corpus(60, 1), corpus(60, 1, fixed=2.0)   # the same problems, other times
    fits, fit = [], RankingModel.fit

    def spy(dataset, params, margin_folds=3, date=None):
        if margin_folds:   # the folds' fits, not their margin folds' inner ones
            fits.append(dataset)
        return fit(dataset, params, margin_folds, date)
    monkeypatch.setattr(RankingModel, "fit", spy)
    report = evaluate(data, folds=3, params=SMALL, margin_folds=2, beside=beside)
    assert report.records == 60 and len(fits) == 3
    everything = {geometry(r.problem) for r in data.records}
    for trained in fits:
        own = [r for r in trained.records if any(r is d for d in data.records)]
        test = everything - {geometry(r.problem) for r in own}
        assert test and all(r in beside.records for r in trained.records if r not in own)
        assert [r for r in trained.records if r not in own] == \
            [r for r in beside.records if geometry(r.problem) not in test]


OTHER = dataclasses.replace(DEVICE, compute_units=32)


@pytest.fixture(scope="module")
def shipped():
    """The model of the synthetic device (B's fixed cost 1 ms)."""
    return RankingModel.fit(corpus(500, 1), SMALL, margin_folds=2)


def test_refit_keeps_a_model_that_learns_a_shifted_device(shipped):
    """On a device where B's fixed cost is 8 ms, the shipped model misses where A now wins; the
    refit learns it, scores better on the held-out records and is kept, self-contained (the
    shipped trees plus the new ones) and for the user's device."""
    user = corpus(400, 3, fixed=8.0, device=OTHER)
    model, report, kept = refit(shipped, user, seed=0, rounds=40)
    assert kept and report.kept and model is not shipped
    assert report.refit.within10 > report.shipped.within10 + 0.03, report
    assert report.refit.within10 >= 0.9 and report.held_out_records + report.train_records == 400
    assert len(model.solvers["fake.A"].leaf) == len(shipped.solvers["fake.A"].leaf) + 40
    assert model.device == OTHER and model.training["refits"][-1]["records"] == report.train_records


def test_refit_rejects_a_model_trained_on_noise(shipped):
    """The user's training records carry random times (the held-out ones the truth): the refit
    learns noise, scores worse on the held-out records, and the shipped model is returned."""
    user = corpus(400, 3)
    mask = held_out([r.problem for r in user.records], 0.25, seed=0)
    rng = np.random.default_rng(0)
    noisy = tuple(r if held else Record(r.problem, {n: float(np.exp(rng.uniform(-3, 3)))
                                                    for n in r.times_ms})
                  for r, held in zip(user.records, mask))
    model, report, kept = refit(shipped, Dataset(DEVICE, noisy), seed=0, rounds=40)
    assert not kept and model is shipped
    assert report.refit.within10 < report.shipped.within10
