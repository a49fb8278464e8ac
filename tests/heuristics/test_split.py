"""convsolve.heuristics.split: grouped splits never put one geometry on both sides."""
import numpy as np
import pytest
from convsolve import Problem, ValidationError
from convsolve.heuristics import geometry, grouped_folds, held_out
from synthetic_corpus import problems


def layers():
    """40 geometries, each at several batches and in the three directions (360 problems)."""
    found = []
    for p in problems(40, 8):
        for n in (1, 4, 32):
            for direction in ("fwd", "bwd", "wrw"):
                found.append(Problem.conv2d((n, *p.x.shape[1:]), p.w.shape, p.conv.strides,
                                            p.conv.pads, p.conv.dilations, p.groups, direction))
    return found


def test_geometry_ignores_batch_and_direction_only():
    p = Problem.conv2d((8, 16, 14, 14), (32, 16, 3, 3), 1, 1)
    assert geometry(p) == geometry(Problem.conv2d((1, 16, 14, 14), (32, 16, 3, 3), 1, 1,
                                                  direction="wrw"))
    assert geometry(p) != geometry(Problem.conv2d((8, 16, 14, 14), (32, 16, 3, 3), 1, 0))


@pytest.mark.parametrize("folds", [2, 5])
def test_grouped_folds_keep_each_geometry_in_one_fold(folds):
    """Every geometry's problems share one fold; folds are non-empty and balanced to within one
    geometry's problems."""
    found = layers()
    fold = grouped_folds(found, folds, seed=3)
    where = {}
    for problem, f in zip(found, fold):
        where.setdefault(geometry(problem), set()).add(int(f))
    assert all(len(places) == 1 for places in where.values())
    sizes = np.bincount(fold, minlength=folds)
    assert sizes.min() > 0 and sizes.max() - sizes.min() <= 9
    assert not np.array_equal(fold, grouped_folds(found, folds, seed=4))


def test_held_out_takes_whole_geometries_near_the_fraction():
    found = layers()
    mask = held_out(found, 0.25, seed=1)
    inside = {geometry(p) for p, m in zip(found, mask) if m}
    outside = {geometry(p) for p, m in zip(found, mask) if not m}
    assert not inside & outside and 0.2 <= mask.mean() <= 0.3


def test_bad_splits_are_refused():
    found = layers()
    with pytest.raises(ValidationError, match="folds"):
        grouped_folds(found, 41)
    with pytest.raises(ValidationError, match="at least 2 geometries"):
        held_out(found[:9], 0.25)
    with pytest.raises(ValidationError, match="fraction"):
        held_out(found, 1.0)
