#!/usr/bin/env python3
"""How reproducible a ranking corpus's labels are: two collections of one corpus on one device.

    .venv/bin/python scripts/heuristics_noise.py data/heuristics/cpu-epyc-avx2-2026-12-04.jsonl.gz \\
        data/heuristics/cpu-epyc-avx2-2026-12-05.jsonl.gz --changed winograd,implicit_gemm

A record holds one median per solver, so a single file cannot tell its noise; two collections of
the same problems can.  Over the problems both files time, by the best time in the second file:
how often the first file's winner is within 10% of the second's best, and the spread (sd) of
each solver's log time relative to its problem's mean, first file against second (solvers whose
code changed between the two, --changed family prefixes, left out of both).  Then the ceiling
that noise puts on any model: a model that knew every solver's true mean time, judged against
the second file's labels whose log times carry normal noise of sd sigma (by default each size
band's measured spread over sqrt 2, i.e. both files equally noisy: small problems are far
noisier), picks within 10% of the labelled best on the share printed (seeded draws).  Also the near ties: how often the labelled second
best is within 10% and 15% of the best.
"""
import argparse
import math

import numpy as np
from convsolve.heuristics import read_dataset
from convsolve.heuristics.model import WITHIN

BANDS_MS = (0.0, 0.02, 0.05, 0.2, 1.0, 5.0, math.inf)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("first")
    parser.add_argument("second")
    parser.add_argument("--changed", default="", help="solver family prefixes to leave out")
    parser.add_argument("--sigma", type=float, help="label noise for the ceiling (log time; "
                        "default: measured per band)")
    parser.add_argument("--draws", type=int, default=20)
    args = parser.parse_args()
    changed = tuple(f"{p.strip()}." for p in args.changed.split(",") if p.strip())
    first = {r.problem.key(): r.times_ms for r in read_dataset(args.first).timed().records}
    second = [r for r in read_dataset(args.second).timed().records]
    rows = []   # (band, first's winner hits on second, squared relative differences, their count)
    for record in second:
        other = first.get(record.problem.key(), {})
        names = [n for n in record.times_ms if n in other and not n.startswith(changed)]
        if len(names) < 2:
            continue
        a, b = (np.log([t[n] for n in names]) for t in (other, record.times_ms))
        diff = (b - b.mean()) - (a - a.mean())
        best = min(record.times_ms[n] for n in names)
        hit = record.times_ms[min(names, key=other.__getitem__)] <= WITHIN * best
        band = int(np.searchsorted(BANDS_MS, best, side="right")) - 1
        rows.append((band, hit, float(diff @ diff) * len(names) / (len(names) - 1), len(names)))
    bands, hits, squares, counts = (np.array(column) for column in zip(*rows))
    spread = math.sqrt(squares.sum() / counts.sum())
    print(f"{len(rows)} problems in both files; first file's winner within 10% on the second: "
          f"{hits.mean():.1%}; sd of relative log times {spread:.3f}")
    sigma = {}   # band: label noise, one file's
    for band in sorted(set(bands.tolist())):
        pick = bands == band
        band_spread = math.sqrt(squares[pick].sum() / counts[pick].sum())
        sigma[band] = band_spread / math.sqrt(2) if args.sigma is None else args.sigma
        print(f"  best {BANDS_MS[band]:g}-{BANDS_MS[band + 1]:g} ms: {pick.sum():5d} problems, "
              f"winner reproduced {hits[pick].mean():.1%}, sd {band_spread:.3f}")
    sorted_times = [sorted(r.times_ms.values()) for r in second if len(r.times_ms) > 1]
    gaps = np.array([t[1] / t[0] for t in sorted_times])
    print(f"second file: second best within 10% of the best on {np.mean(gaps <= 1.10):.1%}, "
          f"within 15% on {np.mean(gaps <= 1.15):.1%} of {len(gaps)} problems")
    fallback = spread / math.sqrt(2) if args.sigma is None else args.sigma
    rng, shares = np.random.default_rng(0), []
    for _ in range(args.draws):
        hit = 0
        for record in second:
            labels = np.log(list(record.times_ms.values()))
            band = int(np.searchsorted(BANDS_MS, record.best_ms, side="right")) - 1
            truth = labels + rng.normal(0.0, sigma.get(band, fallback), len(labels))
            hit += labels[truth.argmin()] - labels.min() <= math.log(WITHIN)
        shares.append(hit / len(second))
    noise = "the bands' sd / sqrt 2" if args.sigma is None else f"sd {args.sigma:g}"
    print(f"a perfect model against labels of noise {noise}: within 10% on "
          f"{np.mean(shares):.1%} (the ceiling)")


if __name__ == "__main__":
    main()
