"""convsolve.heuristics.gbdt: the boosted trees fit, predict by the documented layout, extend
and round-trip through JSON."""
import json

import numpy as np
import pytest
from convsolve import ValidationError
from convsolve.heuristics import Ensemble, Forest, Params
from convsolve.heuristics.gbdt import NO_SPLIT, fit


def nonlinear(count, seed):
    """Rows of 6 uniform features and y = sin(2 x0) + x1^2 + (x3 if x2 > 0) (x4, x5 unused)."""
    x = np.random.default_rng(seed).uniform(-2, 2, (count, 6))
    return x, np.sin(2 * x[:, 0]) + x[:, 1] ** 2 + np.where(x[:, 2] > 0, x[:, 3], 0)


def slow_predict(ensemble, row):
    """One row's prediction, tree by tree and node by node, as the module docstring says."""
    total = ensemble.base
    for feature, threshold, leaf in zip(ensemble.feature, ensemble.threshold, ensemble.leaf):
        node = 0
        while node < len(feature):
            node = 2 * node + 1 + int(row[feature[node]] > threshold[node])
        total += leaf[node - len(feature)]
    return total


def test_fits_a_known_nonlinear_function():
    """Held-out RMSE of a fit of a sine, a square and a switched term is under a fifth of y's
    spread (a constant scores 1.0, a least-squares linear fit 0.92; this fit 0.15)."""
    x, y = nonlinear(2000, 1)
    model = fit(x[:1500], y[:1500], Params(rounds=80, depth=4))
    error = np.sqrt(np.mean((model.predict(x[1500:]) - y[1500:]) ** 2))
    assert error < 0.2 * np.std(y), error


def test_a_hand_written_tree_routes_as_documented():
    """Node i sends x to 2i+1 when x[f] <= t and to 2i+2 when x[f] > t; a NO_SPLIT node sends
    every sample left; the prediction is base + the leaf."""
    tree = Ensemble(10.0, np.array([[1, 0, 0]]), np.array([[0.5, -1.0, NO_SPLIT]]),
                    np.array([[1.0, 2.0, 3.0, 4.0]]))
    rows = np.array([[-2.0, 0.0], [0.0, 0.0], [-1.0, 0.5], [0.0, 1.0], [9e300, 9e300]])
    assert tree.predict(rows).tolist() == [11.0, 12.0, 11.0, 13.0, 13.0]


def test_stacked_forest_equals_each_ensemble_tree_by_tree():
    """Forest's vectorised pass (rows in chunks, ensembles of other sizes stacked) gives what a
    node-by-node walk gives, for random complete trees of depth 5."""
    rng = np.random.default_rng(2)
    ensembles = [Ensemble(float(rng.normal()), rng.integers(0, 7, (trees, 31)),
                          rng.normal(size=(trees, 31)), rng.normal(size=(trees, 32)))
                 for trees in (1, 5, 30)]
    rows = rng.normal(size=(21, 7))
    found = Forest(ensembles).predict(rows)
    expected = [[slow_predict(e, row) for e in ensembles] for row in rows]
    assert found.shape == (21, 3) and np.allclose(found, expected, rtol=1e-12, atol=1e-12)


def test_same_seed_same_model_another_seed_another():
    """With row subsampling, one seed gives equal arrays and a second seed other ones."""
    x, y = nonlinear(400, 3)
    first, again, other = (fit(x, y, Params(rounds=10, depth=3, subsample=0.6, seed=seed))
                           for seed in (4, 4, 5))
    assert json.dumps(first.to_json()) == json.dumps(again.to_json())
    assert json.dumps(first.to_json()) != json.dumps(other.to_json())


def test_base_margin_continues_another_ensemble():
    """Trees fitted on another ensemble's predictions as margin extend it: the combined
    ensemble predicts their sum and fits the data better than the first alone."""
    x, y = nonlinear(800, 4)
    first = fit(x, y, Params(rounds=10, depth=3))
    more = fit(x, y, Params(rounds=10, depth=3), base_margin=first.predict(x))
    both = first.extend(more)
    assert more.base == 0.0 and len(both.leaf) == 20
    assert np.allclose(both.predict(x), first.predict(x) + more.predict(x))
    assert np.mean((both.predict(x) - y) ** 2) < 0.8 * np.mean((first.predict(x) - y) ** 2)


def test_weights_and_min_leaf():
    """With one feature value nothing splits: the prediction is the weighted mean; a min_leaf
    above half the samples forbids every split."""
    x = np.zeros((4, 2))
    model = fit(x, np.array([0.0, 0.0, 0.0, 4.0]), Params(rounds=1, depth=2),
                weight=np.array([1.0, 1.0, 1.0, 5.0]))
    assert model.predict(x[:1])[0] == pytest.approx(2.5)
    x, y = nonlinear(100, 5)
    flat = fit(x, y, Params(rounds=3, depth=3, min_leaf=51))
    assert (flat.threshold == NO_SPLIT).all() and len(set(flat.predict(x))) == 1


def test_json_round_trip_is_exact():
    """to_json -> JSON text -> from_json predicts bit for bit what the fitted ensemble does."""
    x, y = nonlinear(300, 6)
    model = fit(x, y, Params(rounds=15, depth=4))
    again = Ensemble.from_json(json.loads(json.dumps(model.to_json())), "e", 6)
    assert np.array_equal(again.predict(x), model.predict(x))


@pytest.mark.parametrize("field, value", [("rounds", 0), ("depth", 13), ("bins", 1),
                                          ("learning_rate", 0.0), ("subsample", 1.5),
                                          ("l2", -1.0), ("min_leaf", True)])
def test_bad_params_name_the_field(field, value):
    with pytest.raises(ValidationError, match=f"params.{field}"):
        Params(**{field: value})


def test_bad_training_data_is_refused():
    with pytest.raises(ValidationError, match="training data"):
        fit(np.array([[np.nan]]), np.array([1.0]), Params())
