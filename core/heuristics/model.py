"""The learned solver ranking: each known solver's predicted time for a problem on a device.

A model is one ensemble for the scale (log of the best time of a problem) and one per solver
for its regret, log(t_solver / t_best), fitted on the problems where that solver has a time
(regret regression: HEURISTICS.md measured it best of the numpy methods, and it never picked a
naive kernel worse than 2.2x).  A solver's predicted time is exp(scale + regret).
"""
from __future__ import annotations

import datetime
import gzip
import json
import math
import os
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import NoReturn

import numpy as np

from ..errors import ModelError, ValidationError
from ..problem import Problem
from . import gbdt
from .data import Dataset, Record
from .features import FEATURE_NAMES, DeviceFacts, problem_features
from .split import geometry, grouped_folds

#: The version save writes: 2 packs the trees' tables (gbdt.pack_table); READS are the ones
#: load takes (version 1 holds them as JSON lists).
FORMAT, VERSION, READS = "convsolve-ranker", 2, (1, 2)
#: Solvers ranked after every other by rule: a name holding one of these words (any case), such
#: as direct.NaiveFwd.  Reference kernels are correct but slow everywhere, and a learned model's
#: rare mistake on one costs most (HEURISTICS.md: up to 7,209x); so a demoted solver's predicted
#: time is raised to DEMOTED_GAP times the slowest prediction of a solver that is not demoted.
DEMOTED_WORDS = ("naive", "reference")
DEMOTED_GAP = 4.0
#: "A hit": the pick's measured time within this factor of the best.
WITHIN = 1.10
#: The auto budget's rule, chosen at fit on out-of-fold predictions: the smallest margin (in log
#: time) of MARGINS whose auto budget hits on at least AUTO_HIT of the problems while timing at
#: most AUTO_MEAN_COUNT solvers on average; when none reaches AUTO_HIT, the largest that keeps
#: that average.
AUTO_HIT, AUTO_MEAN_COUNT = 0.975, 2.0
MARGINS = tuple(0.025 * i for i in range(61))   # 0 to 1.5 (a factor 4.5)


def demoted(name: str) -> bool:
    """Whether solver ``name`` is ranked last by rule (DEMOTED_WORDS)."""
    return any(word in name.lower() for word in DEMOTED_WORDS)


def rank(predicted: Mapping[str, float], candidates: Iterable[str]) -> list[str]:
    """``candidates`` by predicted time or score, lowest first; those without one last; ties by
    name."""
    return sorted(candidates, key=lambda name: (predicted.get(name, math.inf), name))


def auto_count(predicted: Mapping[str, float], margin: float) -> int:
    """How many of the top 3 to time: those whose predicted time is within a factor
    exp(``margin``) of the fastest prediction (1 to 3, at most len(predicted))."""
    times = sorted(predicted.values())[:3]
    return max(1, sum(math.log(t / times[0]) <= margin for t in times)) if times else 0


def top_regrets(order: Sequence[str], record: Record) -> np.ndarray:
    """The measured time over the best of the fastest of the first 1, 2 and 3 solvers of
    ``order`` (a ranking of ``record``'s timed solvers)."""
    times = [record.times_ms[name] for name in (list(order) * 3)[:3]]
    return np.minimum.accumulate(times) / record.best_ms


def choose_margin(predicted: Sequence[Mapping[str, float]], records: Sequence[Record]) -> float:
    """The auto margin by the rule above, from ``predicted`` times of ``records``' solvers."""
    if not records:
        return 0.0
    gaps, regrets = np.full((len(records), 2), np.inf), np.empty((len(records), 3))
    for row, (guess, record) in enumerate(zip(predicted, records)):
        known = {n: guess[n] for n in record.times_ms if n in guess}
        top = sorted(known.values())[:3]
        if len(top) > 1:
            gaps[row, :len(top) - 1] = np.log(np.array(top[1:]) / top[0])
        regrets[row] = top_regrets(rank(known, record.times_ms), record)
    count = 1 + (gaps[:, :, None] <= np.array(MARGINS)).sum(axis=1)      # (records, margins)
    hits = (np.take_along_axis(regrets, count - 1, axis=1) <= WITHIN).mean(axis=0)
    affordable = count.mean(axis=0) <= AUTO_MEAN_COUNT
    good = np.flatnonzero(affordable & (hits >= AUTO_HIT))
    return MARGINS[good[0] if len(good) else max(np.flatnonzero(affordable), default=0)]


Regrets = dict[str, tuple[np.ndarray, np.ndarray]]   # solver: (rows, log regret)


def _targets(data: Dataset) -> tuple[np.ndarray, np.ndarray, Regrets]:
    """(features, log best time, {solver: (rows, log regret)}) of ``data``'s timed records."""
    if not len(data):
        raise ValidationError("dataset", 0, "no record has a time to learn from")
    x = data.features()
    best = np.array([r.best_ms for r in data.records])
    regret = {}
    for name in data.solvers():
        rows = np.array([i for i, r in enumerate(data.records) if name in r.times_ms])
        times = np.array([data.records[i].times_ms[name] for i in rows])
        regret[name] = (rows, np.log(times / best[rows]))
    return x, np.log(best), regret


def _today() -> str:
    return datetime.date.today().isoformat()


@dataclass(frozen=True, eq=False)
class RankingModel:
    """A fitted ranking for one device class (see the module's docstring)."""

    device: DeviceFacts
    params: gbdt.Params
    scale: gbdt.Ensemble
    solvers: Mapping[str, gbdt.Ensemble]
    auto_margin: float = 0.0
    training: Mapping[str, object] = field(default_factory=dict)

    @cached_property
    def _forest(self) -> gbdt.Forest:
        return gbdt.Forest([self.scale, *self.solvers.values()])

    @cached_property
    def _index(self) -> dict[str, int]:
        return {name: column for column, name in enumerate(self.solvers)}

    @cached_property
    def _demoted(self) -> tuple[np.ndarray, np.ndarray]:
        """(columns of demoted solvers, of the others)."""
        low = np.array([demoted(name) for name in self.solvers])
        return np.flatnonzero(low), np.flatnonzero(~low)

    # {{{ fitting

    @classmethod
    def fit(cls, dataset: Dataset, params: gbdt.Params = gbdt.DEFAULT_PARAMS,
            margin_folds: int = 3, date: str | None = None) -> RankingModel:
        """A model fitted to ``dataset``'s timed records; its auto margin chosen on predictions
        of ``margin_folds`` geometry-grouped folds (0, or too few geometries: margin 0)."""
        data = dataset.timed()
        x, log_best, regret = _targets(data)
        solvers = {name: gbdt.fit(x[rows], y, params) for name, (rows, y) in regret.items()}
        counts = {name: len(rows) for name, (rows, _) in regret.items()}
        model = cls(data.device, params, gbdt.fit(x, log_best, params), solvers, 0.0, {
            "records": len(data), "date": date or _today(), "params": asdict(params),
            "margin_folds": margin_folds, "solver_records": counts, "header": dict(data.header)})
        problems = [r.problem for r in data.records]
        if margin_folds < 2 or len({geometry(p) for p in problems}) < margin_folds:
            return model
        fold = grouped_folds(problems, margin_folds, params.seed)
        guesses: list[Mapping[str, float]] = [{}] * len(data)
        for f in range(margin_folds):
            inner = cls.fit(data.subset(fold != f), params, 0, date)
            rows = np.flatnonzero(fold == f)
            for row, guess in zip(rows, inner.predict_batch([problems[i] for i in rows],
                                                            data.device)):
                guesses[row] = guess
        return replace(model, auto_margin=choose_margin(guesses, data.records))

    def continued(self, dataset: Dataset, rounds: int = 50, seed: int = 0) -> RankingModel:
        """This model with ``rounds`` more trees per ensemble fitted to ``dataset``'s records
        (its predictions as base margins, TVM-style), a new solver's ensemble fitted whole; the
        result holds both, and is for ``dataset``'s device."""
        data = dataset.timed()
        x, log_best, regret = _targets(data)
        more = replace(self.params, rounds=rounds, seed=seed)
        margin = self._forest.predict(x)
        index, solvers = self._index, dict(self.solvers)
        for name, (rows, y) in regret.items():
            if name in solvers:
                solvers[name] = solvers[name].extend(
                    gbdt.fit(x[rows], y, more, base_margin=margin[rows, 1 + index[name]]))
            else:
                solvers[name] = gbdt.fit(x[rows], y, replace(self.params, seed=seed))
        earlier = self.training.get("refits")
        refits = [*(earlier if isinstance(earlier, list) else []),
                  {"records": len(data), "date": _today(), "rounds": rounds, "seed": seed}]
        scale = self.scale.extend(gbdt.fit(x, log_best, more, base_margin=margin[:, 0]))
        return replace(self, device=data.device, scale=scale, solvers=dict(sorted(
            solvers.items())), training={**self.training, "refits": refits})

    # }}}

    # {{{ predicting

    def log_ms(self, x: np.ndarray) -> np.ndarray:
        """(rows, solvers) predicted log times (ms) for rows of features, the demotion applied;
        columns in the order of ``solvers``."""
        out = self._forest.predict(x)
        logs = out[:, 1:] + out[:, :1]
        low, high = self._demoted
        if len(low) and len(high):
            floor = logs[:, high].max(axis=1, keepdims=True) + math.log(DEMOTED_GAP)
            logs[:, low] = np.maximum(logs[:, low], floor)
        return logs

    def predict_batch(self, problems: Sequence[Problem], device: DeviceFacts,
                      solver_names: Iterable[str] | None = None) -> list[dict[str, float]]:
        """For each problem, {solver: predicted ms} for the solvers of ``solver_names`` (all
        when None) that the model knows."""
        index = self._index
        wanted = list(index) if solver_names is None else [n for n in solver_names if n in index]
        x = np.array([problem_features(p, device) for p in problems]).reshape(len(problems), -1)
        return [{n: math.exp(row[index[n]]) for n in wanted} for row in self.log_ms(x).tolist()]

    def predict_ms(self, problem: Problem, device: DeviceFacts,
                   solver_names: Iterable[str]) -> dict[str, float]:
        """{solver: predicted ms} for the solvers of ``solver_names`` the model knows."""
        row, index = self.log_ms(problem_features(problem, device)[None])[0].tolist(), self._index
        return {n: math.exp(row[index[n]]) for n in solver_names if n in index}

    def auto_count(self, predicted: Mapping[str, float]) -> int:
        """How many of the top 3 of ``predicted`` (predict_ms's answer) the auto budget times."""
        return auto_count(predicted, self.auto_margin)

    # }}}

    # {{{ files

    def to_json(self) -> dict[str, object]:
        """The model as a JSON-ready dict (from_json reads it back exactly)."""
        return {"format": FORMAT, "version": VERSION, "features": list(FEATURE_NAMES),
                "device": self.device.to_dict(), "params": asdict(self.params),
                "training": dict(self.training), "auto_margin": self.auto_margin,
                "scale": self.scale.to_json(),
                "solvers": {name: e.to_json() for name, e in self.solvers.items()}}

    @classmethod
    def from_json(cls, data: object, source: str = "model") -> RankingModel:
        """The model of to_json's dict; ModelError naming ``source`` and what is wrong."""
        def fail(what: str) -> NoReturn:
            raise ModelError(f"{source}: {what}")

        if not isinstance(data, dict) or data.get("format") != FORMAT:
            fail(f"not a {FORMAT!r} model")
        if isinstance(data.get("version"), bool) or data.get("version") not in READS:
            fail(f"version {data.get('version')!r}; this convsolve reads versions "
                 f"{' and '.join(map(str, READS))} (refit the model with this release)")
        theirs = data["features"] if isinstance(data.get("features"), list) else []
        if theirs != list(FEATURE_NAMES):
            first = next((i for i, pair in enumerate(zip(theirs, FEATURE_NAMES))
                          if pair[0] != pair[1]), min(len(theirs), len(FEATURE_NAMES)))
            fail(f"features differ from this convsolve's from index {first} on (refit it)")
        missing = {"device", "params", "training", "auto_margin", "scale", "solvers"} - set(data)
        if missing:
            fail(f"missing {sorted(missing)} (truncated?)")
        try:
            device, params = DeviceFacts.from_dict(data["device"]), gbdt.Params(**data["params"])
        except (ValidationError, TypeError) as exc:
            fail(str(exc))
        if not gbdt.finite_number(data["auto_margin"]) or data["auto_margin"] < 0:
            fail(f"auto_margin: expected a finite number >= 0, got {data['auto_margin']!r}")
        if not isinstance(data["training"], dict) or not isinstance(data["solvers"], dict) \
                or not data["solvers"]:
            fail("'training' must be an object, 'solvers' an object of at least one solver")
        width = len(FEATURE_NAMES)
        scale = gbdt.Ensemble.from_json(data["scale"], f"{source}.scale", width)
        solvers = {name: gbdt.Ensemble.from_json(e, f"{source}.solvers[{name!r}]", width)
                   for name, e in data["solvers"].items()}
        for where, e in [("scale", scale), *solvers.items()]:
            if e.depth != params.depth:
                fail(f"{where}'s trees have depth {e.depth}, params.depth is {params.depth}")
        return cls(device, params, scale, solvers, float(data["auto_margin"]), data["training"])

    def save(self, path: str | os.PathLike[str]) -> None:
        """The model as gzip-compressed JSON at ``path`` (written whole, then renamed)."""
        path = Path(path)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temporary.write_bytes(gzip.compress(json.dumps(self.to_json()).encode(), mtime=0))
        os.replace(temporary, path)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> RankingModel:
        """The model saved at ``path`` (gzip or plain JSON); ModelError naming the file when it
        cannot be read, is truncated or corrupt, or is not a valid model."""
        try:
            raw = Path(path).read_bytes()
            text = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
            data = json.loads(text)
        except (OSError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
            raise ModelError(f"{path}: cannot read the model file ({exc})", path) from None
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ModelError(f"{path}: not JSON, truncated? ({exc})", path) from None
        try:
            return cls.from_json(data, str(path))
        except ModelError as exc:
            raise ModelError(str(exc), path) from None

    # }}}
