"""convsolve.heuristics.model: the ranking learns a known cost model, demotes naive solvers,
budgets by its margin, and reads back only well-formed model files.

data/tiny_ranker.json was written by dataclasses.replace(RankingModel.fit(synthetic_corpus.corpus(
60, 5), Params(rounds=4, depth=2, min_leaf=2), margin_folds=0, date="2026-12-05"), auto_margin=0.25)
and data/tiny_ranker_outputs.json holds its log_ms on corpus(8, 6)'s problems; a change of the
format or the features must come with a new version (and new files), never silent new outputs.
data/tiny_ranker_v2.json is the same model saved in version 2 (packed tables).
"""
import base64
import copy
import gzip
import json
import math
from pathlib import Path

import numpy as np
import pytest
from convsolve import Problem, ValidationError
from convsolve.errors import ModelError
from convsolve.heuristics import (
    FEATURE_NAMES,
    Dataset,
    DeviceFacts,
    Params,
    RankingModel,
    Record,
    geometry,
    problem_features,
)
from convsolve.heuristics.model import MARGINS, auto_count, choose_margin, demoted
from synthetic_corpus import DEVICE, corpus

DATA = Path(__file__).parent / "data"
SMALL = Params(rounds=40, depth=4)


@pytest.fixture(scope="module")
def trained():
    """A model of the synthetic solvers, fitted on 600 problems."""
    return RankingModel.fit(corpus(600, 1), SMALL, margin_folds=2)


def test_a_known_cost_model_is_ranked_right_on_unseen_geometries(trained):
    """On problems whose geometry training never saw, the pick is within 10% of the best on at
    least 95% (no solver alone reaches 45%), and never the naive one."""
    seen = {geometry(r.problem) for r in corpus(600, 1).records}
    test = [r for r in corpus(400, 2).records if geometry(r.problem) not in seen]
    guesses = trained.predict_batch([r.problem for r in test], DEVICE)
    picks = [min(guess, key=guess.get) for guess in guesses]
    hits = [r.times_ms[pick] <= 1.1 * r.best_ms for r, pick in zip(test, picks)]
    assert len(test) > 150 and np.mean(hits) >= 0.95, np.mean(hits)
    assert "direct.NaiveFwd" not in picks


def test_predictions_cover_the_known_solvers_asked_for(trained):
    """predict_ms answers for the known solvers asked about (unknown ones absent), positive
    times equal to predict_batch's."""
    problem = corpus(1, 9).records[0].problem
    found = trained.predict_ms(problem, DEVICE, ["fake.B", "other.Unknown", "fake.A"])
    assert list(found) == ["fake.B", "fake.A"] and min(found.values()) > 0
    assert trained.predict_batch([problem], DEVICE)[0]["fake.A"] == found["fake.A"]


def test_naive_solvers_are_ranked_last_even_when_fastest():
    """A solver named Naive (or Reference) that measured fastest everywhere is still predicted
    at least DEMOTED_GAP times slower than every other solver."""
    records = [Record(r.problem, {**r.times_ms, "direct.NaiveFwd": r.best_ms / 10,
                                  "x.ReferenceConv": r.best_ms / 5})
               for r in corpus(200, 3).records]
    model = RankingModel.fit(Dataset(DEVICE, tuple(records)), SMALL, margin_folds=0)
    for guess in model.predict_batch([r.problem for r in records[:50]], DEVICE):
        others = max(v for k, v in guess.items() if not demoted(k))
        assert min(guess["direct.NaiveFwd"], guess["x.ReferenceConv"]) >= 4.0 * others * 0.999
    assert demoted("direct.NaiveBwdData") and not demoted("gemm.Im2ColGemm")


def test_auto_count_times_the_solvers_within_the_margin():
    assert auto_count({"a": 1.0, "b": 1.05, "c": 1.5}, 0.1) == 2
    assert auto_count({"a": 1.0, "b": 1.2}, 0.1) == 1
    assert auto_count({"a": 1.0, "b": 1.01, "c": 1.02, "d": 1.0}, 0.1) == 3
    assert auto_count({"a": 3.0}, 0.0) == 1 and auto_count({}, 0.5) == 0


def _records(count, times):
    problem = corpus(1, 4).records[0].problem
    return [Record(problem, times)] * count


def test_the_auto_margin_is_the_smallest_that_reaches_the_target():
    """36 right picks by a gap of 1.1 and 4 wrong by a gap of 0.18 hit on 90% alone; a margin
    of 0.2 times both on the wrong ones (mean 1.1 solvers, all hits)."""
    records = _records(40, {"a": 1.0, "b": 2.0})
    predicted = [{"a": 1.0, "b": 3.0}] * 36 + [{"a": 1.2, "b": 1.0}] * 4
    assert choose_margin(predicted, records) == pytest.approx(0.2)


def test_the_auto_margin_keeps_the_mean_count_when_the_target_is_out_of_reach():
    """Always wrong by gaps 0.06 and 0.09 (the third is best): reaching it means 3 solvers a
    problem, over the mean of 2, so the margin is the largest timing 2 (0.075)."""
    records = _records(10, {"a": 2.0, "b": 2.0, "c": 1.0})
    predicted = [{"a": 1.0, "b": math.exp(0.06), "c": math.exp(0.09)}] * 10
    assert choose_margin(predicted, records) == MARGINS[3]


def test_continued_training_starts_from_the_models_predictions():
    """continued() on a device whose B costs 8 ms more keeps the model's trees and adds new
    ones fitted to what its predictions leave: the predicted times of the new records get far
    closer to the measured ones (both the scale and the regrets), unknown solvers are learnt."""
    shipped = RankingModel.fit(corpus(300, 1), SMALL, margin_folds=0)
    records = [Record(r.problem, {**r.times_ms, "new.D": r.times_ms["fake.A"] * 2})
               for r in corpus(300, 1, fixed=8.0).records]
    more = shipped.continued(Dataset(DEVICE, tuple(records)), rounds=30, seed=1)

    def error(model):
        found = model.predict_batch([r.problem for r in records], DEVICE, ["fake.A", "fake.B"])
        return np.mean([(np.log(guess[n]) - np.log(r.times_ms[n])) ** 2
                        for r, guess in zip(records, found) for n in guess])

    assert error(more) < 0.25 * error(shipped), (error(more), error(shipped))
    old, new = shipped.solvers["fake.B"], more.solvers["fake.B"]
    assert len(new.leaf) == len(old.leaf) + 30 and np.array_equal(new.leaf[:40], old.leaf)
    assert "new.D" in more.solvers and "new.D" not in shipped.solvers


def test_fit_needs_a_timed_record():
    empty = Dataset(DEVICE, (Record(corpus(1, 4).records[0].problem, {}, {"a": "no"}),))
    with pytest.raises(ValidationError, match="no record has a time"):
        RankingModel.fit(empty)


@pytest.mark.parametrize("version", [1, 2])
def test_a_stored_tiny_model_reproduces_its_stored_outputs_exactly(version):
    """The committed model, in either version's file, reads back, writes back version 2's JSON,
    and its predicted log times on the stored problems equal the stored ones bit for bit."""
    name = "tiny_ranker.json" if version == 1 else "tiny_ranker_v2.json"
    stored = json.loads((DATA / name).read_text())
    outputs = json.loads((DATA / "tiny_ranker_outputs.json").read_text())
    model = RankingModel.load(DATA / name)
    assert stored["version"] == version and list(model.solvers) == outputs["solvers"]
    assert model.to_json() == json.loads((DATA / "tiny_ranker_v2.json").read_text())
    device = DeviceFacts.from_dict(outputs["device"])
    keys = list(outputs["log_ms"])
    x = np.array([problem_features(Problem.from_key(k), device) for k in keys])
    assert model.log_ms(x).tolist() == [outputs["log_ms"][k] for k in keys]
    first = model.predict_ms(Problem.from_key(keys[0]), device, outputs["solvers"])
    assert list(first.values()) == pytest.approx(np.exp(outputs["log_ms"][keys[0]]), rel=1e-12)
    assert model.auto_margin == 0.25


def test_save_and_load_round_trip(tmp_path, trained):
    """save writes gzip JSON that load reads back to the same predictions; plain JSON loads."""
    trained.save(tmp_path / "m.json.gz")
    assert (tmp_path / "m.json.gz").read_bytes()[:2] == b"\x1f\x8b"
    (tmp_path / "m.json").write_text(json.dumps(trained.to_json()))
    x = corpus(20, 7).features()
    for name in ("m.json.gz", "m.json"):
        again = RankingModel.load(tmp_path / name)
        assert np.array_equal(again.log_ms(x), trained.log_ms(x))
        assert again.auto_margin == trained.auto_margin and again.device == trained.device


def _wrong_depth(d):
    d["scale"] = copy.deepcopy(d["scale"])
    d["scale"]["feature"] = [row[:1] for row in d["scale"]["feature"]]
    d["scale"]["threshold"] = [row[:1] for row in d["scale"]["threshold"]]
    d["scale"]["leaf"] = [row[:2] for row in d["scale"]["leaf"]]


#: Each way to break a model's JSON, and what the error must say.
BREAKS = {
    "format": (lambda d: d.update(format="convsolve-db"), "not a 'convsolve-ranker' model"),
    "version": (lambda d: d.update(version=3), "version 3; this convsolve reads versions 1 and 2"),
    "bool version": (lambda d: d.update(version=True), "version True"),
    "features": (lambda d: d.update(features=d["features"][::-1]), "features differ .* index 0"),
    "fewer features": (lambda d: d.update(features=d["features"][:-1]),
                       f"from index {len(FEATURE_NAMES) - 1} on"),
    "missing": (lambda d: d.pop("scale"), r"missing \['scale'\]"),
    "device": (lambda d: d["device"].pop("compute_units"), "device.compute_units"),
    "params": (lambda d: d["params"].update(depth=0), "params.depth"),
    "margin": (lambda d: d.update(auto_margin=-1), "auto_margin"),
    "leaf shape": (lambda d: d["solvers"]["fake.A"]["leaf"][0].pop(), r"solvers\['fake.A'\].leaf"),
    "nan": (lambda d: d["solvers"]["fake.B"]["threshold"][0].__setitem__(0, math.nan),
            r"solvers\['fake.B'\].threshold: expected a table of 4 x 3 finite numbers"),
    "index": (lambda d: d["scale"]["feature"][0].__setitem__(0, len(FEATURE_NAMES)),
              r"scale.feature: indices outside"),
    "not numbers": (lambda d: d["scale"].update(leaf="x"),
                    r"scale.leaf: expected a table of trees x 2\*\*depth finite numbers"),
    "base": (lambda d: d["scale"].update(base=None), "scale.base"),
    "no solvers": (lambda d: d.update(solvers={}), "an object of at least one solver"),
    "float index": (lambda d: d["scale"]["feature"][0].__setitem__(0, 1.5),
                    r"scale.feature: expected a table of 4 x 3 finite ints"),
    "ragged": (lambda d: d["scale"]["threshold"][1].pop(), "scale.threshold: not a table"),
    "depth": (_wrong_depth, "depth 1, params.depth is 2"),
}


def _packed(part, change):
    """A break of one packed table of the version 2 file: change(table dict)."""
    return lambda d: change(d["solvers"]["fake.A"][part])


def _with_nan(table):
    values = np.frombuffer(base64.b64decode(table["data"]), dtype=table["dtype"]).copy()
    values[0] = math.nan
    table["data"] = base64.b64encode(values.tobytes()).decode()


#: Each way to break a version 2 file's packed tables, and what the error must say.
PACKED_BREAKS = {
    "base64": (_packed("leaf", lambda t: t.update(data="not base64!")),
               r"solvers\['fake.A'\].leaf.data: not base64"),
    "dtype": (_packed("leaf", lambda t: t.update(dtype=">f4")), "expected a packed table"),
    "shape": (_packed("leaf", lambda t: t.update(shape=[4])), "expected a packed table"),
    "short": (_packed("threshold", lambda t: t.update(shape=[5, 3])),
              r"threshold.data: 96 bytes do not fill 5 x 3 of <f8"),
    "nan": (_packed("threshold", _with_nan), r"threshold: expected a table of 4 x 3 finite"),
    "float index": (_packed("feature", lambda t: t.update(dtype="<f8", shape=[1, 3])),
                    r"feature: expected a table of 4 x 3 finite ints"),
}


@pytest.mark.parametrize("stored, breaks, name",
                         [("tiny_ranker.json", BREAKS, name) for name in BREAKS]
                         + [("tiny_ranker_v2.json", PACKED_BREAKS, name) for name in PACKED_BREAKS])
def test_a_malformed_model_raises_model_error_naming_what(tmp_path, stored, breaks, name):
    """Each break of a stored model's JSON (version 1's fields and lists, version 2's packed
    tables), written to a file, fails load with a ModelError naming the file and the field."""
    data = json.loads((DATA / stored).read_text())
    change, message = breaks[name]
    change(data)
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ModelError, match=message) as caught:
        RankingModel.load(path)
    assert str(path) in str(caught.value) and caught.value.path == path


@pytest.mark.parametrize("cut", ["gzip", "json", "missing", "empty"])
def test_a_truncated_or_missing_file_raises_model_error(tmp_path, cut):
    text = (DATA / "tiny_ranker.json").read_bytes()
    path = tmp_path / "cut.json.gz"
    if cut == "gzip":
        path.write_bytes(gzip.compress(text)[:300])
    elif cut == "json":
        path.write_bytes(text[:len(text) // 2])
    elif cut == "empty":
        path.write_bytes(b"")
    with pytest.raises(ModelError, match="cannot read the model file|not JSON") as caught:
        RankingModel.load(path)
    assert str(path) in str(caught.value)
