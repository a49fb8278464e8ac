"""How good a ranking is: geometry-grouped cross-validation of the model beside a baseline, and
a refit on the user's records kept only when it scores no worse on records it did not see.

A problem's candidates are its timed solvers (a failed one counts as not applicable); a ranking
picks among them, solvers it has no score for last.  Regret is the pick's measured time over the
best; top-k is the best of the first k timed; the network total is the sum of the picks' times
over the sum of the best.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np

from ..problem import Problem
from .data import Dataset, Record
from .gbdt import DEFAULT_PARAMS, Params
from .model import WITHIN, RankingModel, auto_count, choose_margin, rank, top_regrets
from .split import geometry, grouped_folds, held_out

#: A ranking to compare with: problem -> {solver: score}, lower is better (e.g. 10 / WTI).
Baseline = Callable[[Problem], Mapping[str, float]]


@dataclass(frozen=True)
class Scores:
    """A ranking's scores over some problems (shares of them, or regret factors)."""

    problems: int
    within10: float           # the pick within 10% of the best
    within25: float
    top2: float               # the best of the first 2 within 10%
    top3: float
    auto: float | None        # the auto budget within 10% (models only)
    auto_mean_count: float | None   # solvers the auto budget times, on average
    geomean_regret: float
    mean_regret: float
    p95_regret: float
    max_regret: float
    network_total: float

    @classmethod
    def of(cls, regrets: np.ndarray, best: np.ndarray, auto: np.ndarray | None) -> Scores:
        """Scores from (problems, 3) top-k regrets, the best times and (problems, 2) auto
        budget regrets and counts (None: no auto budget)."""
        pick = regrets[:, 0]
        return cls(
            problems=len(pick), within10=float(np.mean(pick <= WITHIN)),
            within25=float(np.mean(pick <= 1.25)), top2=float(np.mean(regrets[:, 1] <= WITHIN)),
            top3=float(np.mean(regrets[:, 2] <= WITHIN)),
            auto=None if auto is None else float(np.mean(auto[:, 0] <= WITHIN)),
            auto_mean_count=None if auto is None else float(np.mean(auto[:, 1])),
            geomean_regret=float(np.exp(np.mean(np.log(pick)))), mean_regret=float(np.mean(pick)),
            p95_regret=float(np.percentile(pick, 95)), max_regret=float(np.max(pick)),
            network_total=float(np.sum(pick * best) / np.sum(best)))


@dataclass(frozen=True)
class Breakdown:
    """Scores over all problems, per direction and per family of the measured winner."""

    overall: Scores
    direction: dict[str, Scores]
    family: dict[str, Scores]


def _outcomes(records: Sequence[Record], guesses: Sequence[Mapping[str, float]],
              margin: float | None) -> np.ndarray:
    """(records, 5): top-1/2/3 regrets, auto budget regret and count (NaN without ``margin``)."""
    rows = []
    for record, guess in zip(records, guesses):
        known = {n: guess[n] for n in record.times_ms if n in guess}
        regrets = top_regrets(rank(known, record.times_ms), record)
        count = auto_count(known, margin) if margin is not None and known else 0
        rows.append([*regrets, regrets[count - 1] if count else np.nan, count or np.nan])
    return np.array(rows, dtype=np.float64).reshape(len(rows), 5)


def _breakdown(records: Sequence[Record], outcomes: np.ndarray, auto: bool) -> Breakdown:
    best = np.array([r.best_ms for r in records])
    labels = {"direction": [r.problem.direction.value for r in records],
              "family": [min(r.times_ms, key=r.times_ms.__getitem__).split(".")[0]
                         for r in records]}

    def scores(rows: np.ndarray) -> Scores:
        return Scores.of(outcomes[rows, :3], best[rows], outcomes[rows, 3:] if auto else None)

    parts = {kind: {name: scores(np.array([v == name for v in values]))
                    for name in sorted(set(values))} for kind, values in labels.items()}
    return Breakdown(scores(np.ones(len(records), bool)), parts["direction"], parts["family"])


@dataclass(frozen=True)
class Report:
    """evaluate's answer: the model's scores and the baseline's on the same test folds."""

    records: int
    folds: int
    model: Breakdown
    baseline: Breakdown | None

    def to_dict(self) -> dict[str, object]:
        """The report as a JSON-ready dict."""
        return asdict(self)


def evaluate(dataset: Dataset, folds: int = 5, baseline: Baseline | None = None,
             params: Params = DEFAULT_PARAMS, seed: int = 0, margin_folds: int = 3,
             beside: Dataset | None = None) -> Report:
    """Geometry-grouped ``folds``-fold cross-validation of RankingModel.fit(params) on
    ``dataset``'s timed records, with ``baseline`` (if given) scored on the same test folds;
    ``beside`` (another device's records) joins each fold's training records but for the test
    fold's geometries."""
    data, extra = dataset.timed(), () if beside is None else beside.timed().records
    fold = grouped_folds([r.problem for r in data.records], folds, seed)
    model_out, base_out = np.empty((len(data), 5)), np.empty((len(data), 5))
    for f in range(folds):
        test = np.flatnonzero(fold == f)
        records = [data.records[i] for i in test]
        seen = {geometry(r.problem) for r in records}
        train = data.subset(fold != f).records + tuple(r for r in extra
                                                      if geometry(r.problem) not in seen)
        model = RankingModel.fit(replace(data, records=train), params, margin_folds)
        guesses = model.predict_batch([r.problem for r in records], data.device)
        model_out[test] = _outcomes(records, guesses, model.auto_margin)
        if baseline is not None:
            base_out[test] = _outcomes(records, [baseline(r.problem) for r in records], None)
    return Report(len(data), folds, _breakdown(data.records, model_out, True),
                  None if baseline is None else _breakdown(data.records, base_out, False))


def score(model: RankingModel, dataset: Dataset, baseline: Baseline | None = None) -> Report:
    """``model`` as fitted (no refit: on another device's records, or a shipped model on new
    ones) scored on every timed record of ``dataset``, ``baseline`` beside it; folds 0."""
    data = dataset.timed()
    records = list(data.records)
    guesses = model.predict_batch([r.problem for r in records], data.device)
    base = None if baseline is None else _breakdown(
        records, _outcomes(records, [baseline(r.problem) for r in records], None), False)
    return Report(len(data), 0, _breakdown(records, _outcomes(records, guesses,
                                                              model.auto_margin), True), base)


@dataclass(frozen=True)
class RefitReport:
    """refit's answer: both models' scores on the held-out records, and whether it was kept."""

    train_records: int
    held_out_records: int
    shipped: Scores
    refit: Scores
    kept: bool


def refit(shipped: RankingModel, dataset: Dataset, seed: int = 0, rounds: int = 50,
          fraction: float = 0.25) -> tuple[RankingModel, RefitReport, bool]:
    """``shipped`` continued on ``dataset``'s records (RankingModel.continued) but for a
    geometry-grouped ``fraction`` held out, and its auto margin chosen on those; kept (returned)
    when its within-10% there is at least the shipped model's, else ``shipped`` is returned."""
    data = dataset.timed()
    mask = held_out([r.problem for r in data.records], fraction, seed)
    candidate = shipped.continued(data.subset(~mask), rounds, seed)
    test = data.subset(mask).records
    problems = [r.problem for r in test]
    old = shipped.predict_batch(problems, data.device)
    new = candidate.predict_batch(problems, data.device)
    candidate = replace(candidate, auto_margin=choose_margin(new, test))
    before = _breakdown(test, _outcomes(test, old, shipped.auto_margin), True).overall
    after = _breakdown(test, _outcomes(test, new, candidate.auto_margin), True).overall
    kept = after.within10 >= before.within10
    report = RefitReport(int((~mask).sum()), len(test), before, after, kept)
    return (candidate if kept else shipped), report, kept
