#!/usr/bin/env python3
"""Fit one ranking model on the record files of several devices of a class, for one of them.

    .venv/bin/python scripts/fit_pooled_model.py \
        --data data/heuristics/cpu-epyc-avx512-*.jsonl.gz \
        --also data/heuristics/cpu-xeon-avx512-2026-12-06*.jsonl.gz \
        --out pooled.json.gz

`convsolve heuristics fit` takes one device's files; this fits on --data (the device the model
will serve: its files' repeat records merged as fit merges them, and its device facts for every
record's features) and --also (another device's records, merged likewise, each a record of its
own beside the first device's of the same problem).  With --folds K it scores instead: K-fold
cross-validation grouped by geometry over --data's records, each fold's model fitted on the
rest of --data and on --also less the test fold's geometries (heuristics.evaluate's
``beside``), beside --data alone and a --model file as it is (BENCHMARKS.md "Session 60").
The Zen 4's shipped model was pooled so in session 60; with 11,652 records of its own the pooled
fit no longer beat them alone (BENCHMARKS.md "Session 61"), and it is now `convsolve heuristics
fit` on the Zen 4's records.
"""
import argparse

from convsolve.cli.heuristics import _datasets
from convsolve.heuristics.data import Dataset
from convsolve.heuristics.evaluate import evaluate, score
from convsolve.heuristics.model import RankingModel


def cross_validate(own, other, folds, model_path):
    """Print each ranking's scores over ``own``'s records, each held out once."""
    reports = {"alone": evaluate(own, folds), "pooled": evaluate(own, folds, beside=other)}
    if model_path:
        reports["as is"] = score(RankingModel.load(model_path), own)
    for name, report in reports.items():
        s = report.model.overall
        print(f"{name:7s} {s.problems} problems: within 10% {s.within10:.1%}, 25% "
              f"{s.within25:.1%}, top 2 {s.top2:.1%}, auto {s.auto:.1%} "
              f"({s.auto_mean_count:.2f} timed), mean regret {s.mean_regret:.3f}, "
              f"max {s.max_regret:.2f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", nargs="+", required=True, help="the served device's files")
    parser.add_argument("--also", nargs="+", required=True, help="another device's files")
    parser.add_argument("--out", help="save the pooled model here (gzip JSON)")
    parser.add_argument("--folds", type=int, help="cross-validate instead of fitting")
    parser.add_argument("--model", help="with --folds: a model file scored as it is beside")
    args = parser.parse_args()
    own, other = (_datasets(files).timed() for files in (args.data, args.also))
    if args.folds:
        cross_validate(own, other, args.folds, args.model)
    else:
        model = RankingModel.fit(Dataset(own.device, own.records + other.records, own.header))
        model.save(args.out)
        print(f"fitted on {model.training['records']} records; saved {args.out}")


if __name__ == "__main__":
    main()
