"""Leakage-free splits of problems by geometry: one layer at another batch or direction is never
on both sides of a split."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import ValidationError
from ..problem import Problem


def geometry(problem: Problem) -> str:
    """The layer's shape: the problem's key without its direction and batch."""
    return problem.key().split("-", 2)[2]


def _groups(problems: Sequence[Problem], seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(group index of each problem, group sizes), the groups in an order shuffled by ``seed``."""
    names = [geometry(p) for p in problems]
    distinct = sorted(set(names))
    order = np.random.default_rng(seed).permutation(len(distinct))
    rank = {distinct[i]: position for position, i in enumerate(order)}
    group = np.array([rank[name] for name in names], dtype=np.int64)
    return group, np.bincount(group, minlength=len(distinct))


def grouped_folds(problems: Sequence[Problem], folds: int, seed: int = 0) -> np.ndarray:
    """The fold (0 .. folds-1) of each problem: geometries in a ``seed``-shuffled order, each to
    the fold with the fewest problems so far, so folds are about equal and share no geometry."""
    group, sizes = _groups(problems, seed)
    if isinstance(folds, bool) or not isinstance(folds, int) or not 2 <= folds <= len(sizes):
        raise ValidationError("folds", folds, f"expected 2 to {len(sizes)} (the geometries)")
    fold_of_group, filled = np.zeros(len(sizes), np.int64), np.zeros(folds, np.int64)
    for g, size in enumerate(sizes):
        fold_of_group[g] = filled.argmin()
        filled[fold_of_group[g]] += size
    return fold_of_group[group]


def held_out(problems: Sequence[Problem], fraction: float, seed: int = 0) -> np.ndarray:
    """A boolean mask of the problems held out: whole geometries in a ``seed``-shuffled order
    until ``fraction`` of the problems, at least one geometry on each side."""
    group, sizes = _groups(problems, seed)
    if len(sizes) < 2:
        raise ValidationError("problems", len(problems), "a split needs at least 2 geometries")
    if not 0 < fraction < 1:
        raise ValidationError("fraction", fraction, "expected a number in (0, 1)")
    reach = np.cumsum(sizes) - sizes   # problems held before each group is taken
    taken = max(1, min(int(np.sum(reach < fraction * len(problems))), len(sizes) - 1))
    return group < taken
