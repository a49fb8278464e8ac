"""Gradient-boosted regression trees in numpy: histogram fitting and vectorised inference.

Written here rather than taken from scikit-learn, LightGBM or XGBoost because the runtime must
stay light: those bring scipy (35 MB) or 132 MB with them, for what takes numpy 200 lines.  The
trees are complete binary trees of a fixed depth stored as flat arrays: ``feature`` and
``threshold`` (trees, 2**depth - 1) and ``leaf`` (trees, 2**depth); from node i a sample goes to
2*i + 1 + (x[feature] > threshold).  A node that does not split has threshold NO_SPLIT and sends
every sample left.  A model file holds those arrays packed in JSON (pack_table), never a pickle.
"""
from __future__ import annotations

import base64
import binascii
import itertools
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import ModelError, ValidationError

#: The threshold of a node that does not split: no finite feature is greater.
NO_SPLIT = float(np.finfo(np.float64).max)
MAX_DEPTH = 12   # 4,096 leaves a tree
#: Rows Forest.predict takes at once: 8 ran fastest (75 us a row for 18 x 150 trees of depth 6,
#: 1,000 rows at once 360 us a row: the gathers leave the cache).
ROWS_AT_ONCE = 8
#: Each hyper-parameter's range: an int from low to high, or a number above low (l2: from low)
#: up to high.
LIMITS = {"rounds": (1, 100_000), "depth": (1, MAX_DEPTH), "bins": (2, 256),
          "min_leaf": (1, 1 << 30), "seed": (0, 1 << 62), "learning_rate": (0.0, 1.0),
          "subsample": (0.0, 1.0), "l2": (0.0, 1e9)}
#: The element types a packed table may have (little-endian ints and floats).
PACKED_DTYPES = ("<i8", "<i4", "<i2", "<f8")


def pack_table(table: np.ndarray) -> dict[str, object]:
    """A table as JSON: its little-endian bytes in base64 with its dtype and shape.  Parsing the
    ~460,000 numbers of a shipped model as JSON lists (a model file's version 1) took 150 ms of
    a fresh process's first prediction; these unpack in a few."""
    table = np.ascontiguousarray(table, dtype=table.dtype.newbyteorder("<"))
    return {"dtype": table.dtype.str, "shape": list(table.shape),
            "data": base64.b64encode(table.tobytes()).decode("ascii")}


def unpack_table(value: object, where: str) -> np.ndarray:
    """A table from pack_table's dict, or from a JSON list of rows (version 1); ModelError
    naming ``where`` when it is neither, or its bytes do not fill its shape."""
    if not isinstance(value, Mapping):
        try:
            return np.array(value)
        except ValueError as exc:   # rows of different lengths
            raise ModelError(f"{where}: not a table ({exc})") from None
    shape = value.get("shape")
    if set(value) != {"dtype", "shape", "data"} or value["dtype"] not in PACKED_DTYPES \
            or not isinstance(shape, list) or len(shape) != 2 \
            or not all(isinstance(n, int) and n >= 0 for n in shape):
        raise ModelError(f"{where}: expected a packed table: dtype (one of {PACKED_DTYPES}), "
                         "shape (rows, columns) and data")
    try:
        raw = base64.b64decode(str(value["data"]), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ModelError(f"{where}.data: not base64 ({exc})") from None
    dtype = np.dtype(value["dtype"])
    if len(raw) != shape[0] * shape[1] * dtype.itemsize:
        raise ModelError(f"{where}.data: {len(raw)} bytes do not fill {shape[0]} x {shape[1]} "
                         f"of {dtype.str}")
    return np.frombuffer(raw, dtype=dtype).reshape(shape)


def finite_number(value: object) -> bool:
    """Whether ``value`` is an int or float (not a bool) that a float64 holds, not inf or NaN."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and abs(value) <= sys.float_info.max


@dataclass(frozen=True)
class Params:
    """Hyper-parameters of one fit (the defaults are HEURISTICS.md's measured ones)."""

    rounds: int = 150            # trees
    depth: int = 6               # levels of each tree
    bins: int = 32               # quantile bins per feature, set at fit
    learning_rate: float = 0.1   # each tree's leaf values are scaled by it
    min_leaf: int = 3            # fewest samples on either side of a split
    l2: float = 1.0              # L2 penalty on leaf values
    subsample: float = 1.0       # share of samples each tree sees (drawn with ``seed``)
    seed: int = 0

    def __post_init__(self) -> None:
        for name, (low, high) in LIMITS.items():
            value, whole = getattr(self, name), isinstance(low, int)
            closed = whole or name == "l2"
            if not finite_number(value) or (whole and not isinstance(value, int)) \
                    or not (low <= value if closed else low < value) or value > high:
                bounds = f"{'[' if closed else '('}{low}, {high}]"
                raise ValidationError(f"params.{name}", value,
                                      f"expected {'an int' if whole else 'a number'} in {bounds}")


DEFAULT_PARAMS = Params()


@dataclass(frozen=True, eq=False)
class Ensemble:
    """A fitted ensemble: prediction = base + the sum of each tree's leaf."""

    base: float
    feature: np.ndarray    # (trees, 2**depth - 1) int64
    threshold: np.ndarray  # (trees, 2**depth - 1) float64
    leaf: np.ndarray       # (trees, 2**depth) float64

    @property
    def depth(self) -> int:
        return int(self.leaf.shape[1]).bit_length() - 1

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Predictions for the rows of ``x`` (samples, features)."""
        return Forest([self]).predict(x)[:, 0]

    def extend(self, more: Ensemble) -> Ensemble:
        """This ensemble followed by ``more``'s trees (fitted with this one's output as margin)."""
        return Ensemble(self.base + more.base, np.vstack([self.feature, more.feature]),
                        np.vstack([self.threshold, more.threshold]),
                        np.vstack([self.leaf, more.leaf]))

    def to_json(self) -> dict[str, object]:
        """The ensemble as JSON-ready packed tables (from_json reads it back exactly)."""
        return {"base": self.base, "feature": pack_table(self.feature.astype(np.int16)),
                "threshold": pack_table(self.threshold), "leaf": pack_table(self.leaf)}

    @classmethod
    def from_json(cls, data: object, where: str, features: int) -> Ensemble:
        """An ensemble from to_json's dict; ModelError naming ``where`` and the field when any
        part is missing, not a table of the right shape, non-finite, or a feature index out of
        range."""
        if not isinstance(data, Mapping) or set(data) != {"base", "feature", "threshold", "leaf"}:
            raise ModelError(f"{where}: expected an object of base, feature, threshold, leaf")
        if not finite_number(data["base"]):
            raise ModelError(f"{where}.base: expected a finite number, got {data['base']!r}")
        tables = {}
        for name, kinds in (("leaf", "iuf"), ("feature", "iu"), ("threshold", "iuf")):
            table = unpack_table(data[name], f"{where}.{name}")
            if name == "leaf":
                trees, leaves = table.shape if table.ndim == 2 else (0, 0)
            shape = (trees, leaves - (name != "leaf"))
            if table.dtype.kind not in kinds or table.shape != shape or not trees \
                    or not np.isfinite(table).all():
                size = "trees x 2**depth" if name == "leaf" else f"{shape[0]} x {shape[1]}"
                kind = "ints" if kinds == "iu" else "numbers"
                raise ModelError(f"{where}.{name}: expected a table of {size} finite {kind}")
            tables[name] = table
        if leaves < 2 or leaves & (leaves - 1) or leaves > 1 << MAX_DEPTH:
            raise ModelError(f"{where}.leaf: {leaves} leaves a tree; expected 2**depth")
        if tables["feature"].min() < 0 or tables["feature"].max() >= features:
            raise ModelError(f"{where}.feature: indices outside [0, {features})")
        return cls(float(data["base"]), tables["feature"].astype(np.int64),
                   tables["threshold"].astype(np.float64), tables["leaf"].astype(np.float64))


class Forest:
    """Several ensembles of one depth stacked, predicted in one pass of array operations.

    Histogram fitting leaves few distinct splits (feature, threshold), so predict tests each of
    them once per row and the walk down the trees only gathers those answers: three array
    operations a level for every tree at once (a third of the time of comparing node by node;
    a node's split and first child side by side, one gather, took the trees of a one-row
    prediction from 71 to 53-55 us: scripts/bench_heuristics.py, 17 ensembles of 150 trees of
    depth 6, a 2-vCPU Xeon).
    """

    def __init__(self, ensembles: Sequence[Ensemble]) -> None:
        depths = {e.depth for e in ensembles}
        if len(depths) != 1:
            raise ValidationError("ensembles", sorted(depths), "expected one common depth")
        self.depth = depths.pop()
        self.width = 1 + max(int(e.feature.max()) for e in ensembles)
        # Level-major: level L's nodes of every tree, tree after tree, then level L + 1's.  Node
        # j of level L of tree t is entry start[L] + t * 2**L + j, its children 2 * entry +
        # start[L + 1] - 2 * start[L] + {0, 1}; the last level's children are leaf indices.
        first = [(1 << level) - 1 for level in range(self.depth + 1)]
        levels = list(itertools.pairwise(first))
        feature = np.concatenate([e.feature[:, a:b].ravel() for a, b in levels
                                  for e in ensembles])
        threshold = np.concatenate([e.threshold[:, a:b].ravel() for a, b in levels
                                    for e in ensembles])
        trees = sum(len(e.leaf) for e in ensembles)
        start = [trees * f for f in first]
        child = 2 * np.arange(start[-1])
        for level, (low, high) in enumerate(itertools.pairwise(start)):
            child[low:high] += (start[level + 1] - 2 * low) - (start[-1] if high == start[-1]
                                                                else 0)
        # the distinct (feature, threshold) pairs, sorted, and each node's: np.unique(axis=1)
        # gives the same in 100 ms for 15 ensembles of 150 trees of depth 6, this in 10
        order = np.lexsort((threshold, feature))
        feature, threshold = feature[order], threshold[order]
        new = np.ones(len(order), dtype=bool)
        new[1:] = (feature[1:] != feature[:-1]) | (threshold[1:] != threshold[:-1])
        split_of = np.empty(len(order), dtype=np.int32)
        split_of[order] = np.cumsum(new) - 1
        # (split, first child) of each node
        self.steps = np.stack([split_of, child.astype(np.int32)], axis=1)
        self.split_feature = feature[new].astype(np.int32)
        self.split_threshold = threshold[new]
        self.roots = np.arange(trees, dtype=np.int32)
        self.leaf = np.concatenate([e.leaf.ravel() for e in ensembles])
        counts = np.array([len(e.leaf) for e in ensembles])
        self.starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        self.base = np.array([e.base for e in ensembles])

    def predict(self, x: np.ndarray) -> np.ndarray:
        """(samples, ensembles) predictions for the rows of ``x`` (samples, features)."""
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] < self.width:
            raise ValidationError("features", x.shape, f"expected rows of {self.width} or more")
        if not len(x):
            return np.empty((0, len(self.base)))
        parts, splits = [], len(self.split_threshold)
        for low in range(0, len(x), ROWS_AT_ONCE):   # a few rows keep the gathers in cache
            rows = x[low:low + ROWS_AT_ONCE]
            one = len(rows) == 1   # immediate mode's case: no offsets, no tiling
            # (rows, splits) answers, flat; row r's start at r * splits
            right = (rows.take(self.split_feature, axis=1) > self.split_threshold).ravel()
            node = self.roots if one else np.tile(self.roots, (len(rows), 1))
            offsets = (np.arange(len(rows), dtype=np.int32) * splits)[:, None]
            for _ in range(self.depth):
                step = self.steps.take(node, axis=0)
                node = step[..., 1] + right.take(step[..., 0] if one else step[..., 0] + offsets)
            parts.append(np.add.reduceat(self.leaf.take(node), self.starts, axis=-1)
                         .reshape(len(rows), -1))
        return (parts[0] if len(parts) == 1 else np.concatenate(parts)) + self.base


def _cuts(column: np.ndarray, bins: int) -> np.ndarray:
    """Up to bins - 1 split points of a feature: midpoints between distinct values at quantiles."""
    distinct = np.unique(column)
    if len(distinct) <= bins:
        chosen = np.arange(len(distinct) - 1)
    else:
        ranks = np.searchsorted(distinct, np.quantile(column, np.arange(1, bins) / bins))
        chosen = np.unique(np.minimum(ranks, len(distinct) - 2))
    return (distinct[chosen] + distinct[chosen + 1]) / 2


def fit(x: np.ndarray, y: np.ndarray, params: Params, weight: np.ndarray | None = None,
        base_margin: np.ndarray | None = None) -> Ensemble:
    """An ensemble fitted to ``y`` from the rows of ``x`` under squared loss, each tree level by
    level on histograms of quantile bins.  ``weight`` weighs the samples; ``base_margin`` (one
    initial prediction per sample, e.g. another ensemble's) makes the trees fit what it leaves
    over, with base 0, so that ``other.extend(result)`` continues ``other``."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    samples, width = x.shape
    if not samples or len(y) != samples or not np.isfinite(x).all() or not np.isfinite(y).all():
        raise ValidationError("training data", x.shape, f"expected finite rows and {samples} labels")
    w = np.ones(samples) if weight is None else np.asarray(weight, dtype=np.float64)
    bins, depth, inner = params.bins, params.depth, (1 << params.depth) - 1
    cut_list = [_cuts(x[:, f], bins) for f in range(width)]
    cuts = np.full((width, bins - 1), NO_SPLIT)
    for f, values in enumerate(cut_list):
        cuts[f, :len(values)] = values
    binned = np.stack([np.searchsorted(c, x[:, f]) for f, c in enumerate(cut_list)], axis=1)
    slot = binned + np.arange(width) * bins        # (samples, features) histogram slots
    base = 0.0 if base_margin is not None else float(np.average(y, weights=w))
    pred = np.full(samples, base) if base_margin is None else np.array(base_margin, dtype=float)
    rng = np.random.default_rng(params.seed)
    feature = np.zeros((params.rounds, inner), np.int64)
    threshold = np.full((params.rounds, inner), NO_SPLIT)
    leaf = np.zeros((params.rounds, inner + 1))
    every = np.arange(samples)
    for tree in range(params.rounds):
        take = every if params.subsample >= 1 else np.sort(rng.choice(
            samples, max(1, int(params.subsample * samples)), replace=False))
        grad, hess = (w * (pred - y))[take], w[take]
        node, split_bin = np.zeros(len(take), np.int64), np.full(inner, bins)
        for level in range(depth):
            first, count = (1 << level) - 1, 1 << level
            key = ((node - first)[:, None] * (width * bins) + slot[take]).ravel()
            per_sample = [grad, hess] if weight is None else [grad, hess, np.ones(len(take))]
            left = [np.bincount(key, np.repeat(v, width), count * width * bins)  # left of a
                    .reshape(count, width, bins).cumsum(axis=2) for v in per_sample]  # split
            g_left, h_left, n_left = left[0], left[1], left[-1]   # n: samples (h unweighted)
            g_all, h_all, n_all = g_left[..., -1:], h_left[..., -1:], n_left[..., -1:]
            with np.errstate(divide="ignore", invalid="ignore"):
                gain = (g_left ** 2 / (h_left + params.l2)
                        + (g_all - g_left) ** 2 / (h_all - h_left + params.l2))[..., :-1]
                parent = g_all[:, 0, 0] ** 2 / (h_all[:, 0, 0] + params.l2)
            allowed = (n_left >= params.min_leaf) & (n_all - n_left >= params.min_leaf)
            gain = np.where(allowed[..., :-1], gain, -np.inf).reshape(count, -1)
            best = gain.argmax(axis=1)
            splits = gain[np.arange(count), best] > parent + 1e-12
            f_best, b_best = best // (bins - 1), best % (bins - 1)
            ids = first + np.flatnonzero(splits)
            feature[tree, ids], split_bin[ids] = f_best[splits], b_best[splits]
            threshold[tree, ids] = cuts[f_best[splits], b_best[splits]]
            node = 2 * node + 1 + (binned[take, feature[tree, node]] > split_bin[node])
        leaves = node - inner
        g_leaf = np.bincount(leaves, grad, inner + 1)
        h_leaf = np.bincount(leaves, hess, inner + 1)
        leaf[tree] = -params.learning_rate * np.divide(
            g_leaf, h_leaf + params.l2, out=np.zeros(inner + 1), where=h_leaf + params.l2 > 0)
        if len(take) < samples:   # route every sample by its bins, as the tree's rows were
            node = np.zeros(samples, np.int64)
            for _ in range(depth):
                node = 2 * node + 1 + (binned[every, feature[tree, node]] > split_bin[node])
        pred += leaf[tree, node - inner]
    return Ensemble(base, feature, threshold, leaf)
