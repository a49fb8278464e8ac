#!/usr/bin/env python3
"""Random conformance sweep: problems drawn at random, every direction, every installed solver
that applies, each checked against the float64 reference at its default config and one random
config of its space (convsolve.testing.check_problem); failures printed as they come.

    .venv/bin/python scripts/random_sweep.py --shapes small --seed 1 --budget-s 1800
    .venv/bin/python scripts/random_sweep.py --shapes mid --gpu-configs   # a GPU's on PoCL
    .venv/bin/python scripts/random_sweep.py --shapes ranks --oclgrind 150

--shapes: `small` (the heuristics sweep's geometry, images and channels cut down, NCHW and NHWC,
a 2e7-FLOP cap), `mid` (that geometry nearly whole: 1e6 to 3e8 FLOPs), `ranks` (ranks 1 to 3,
channels-first and -last, groups, depthwise, asymmetric padding; a 1e7-FLOP cap, 2e5 with
--oclgrind). --gpu-configs: the handle's device reports itself a GPU, so the GPU spaces,
defaults and kernels run natively on a CPU device. --oclgrind N: N problems of the shapes,
capped at 2e5 FLOPs, through check_solver's sanitize mode (workers on Oclgrind as a CPU and as a
GPU), solver by solver. Session 55 (2026-12-06) found three bugs with it (RELIABILITY.md).
"""
import argparse
import random
import sys
import time

from convsolve import Handle, Problem
from convsolve.bench.corpus import sweep_geometry
from convsolve.solvers.registry import registry
from convsolve.testing import check_problem, check_solver
from convsolve.testing.isolation import retyped

LAYOUTS = {1: ("NCW", "NWC"), 2: ("NCHW", "NHWC"), 3: ("NCDHW", "NDHWC")}


def corpus_problem(rng, shrink):
    """The heuristics sweep's geometry, images divided by ``shrink`` and, for small shapes,
    channels drawn from a short list, in NCHW or NHWC."""
    _, c, h, w, k, r, s, stride, padding, dilation, groups = sweep_geometry(rng)
    h, w = max(1, h // shrink), max(1, w // shrink)
    if shrink > 2 and groups == 1:
        c, k = rng.choice((1, 3, 5, 8, 16, 17, 32)), rng.choice((1, 2, 7, 8, 16, 33))
    elif shrink > 2 and groups == c:
        c = groups = rng.choice((1, 3, 8, 17, 32))
        k = c * rng.choice((1, 1, 2))
    elif groups == 1 and rng.random() < 0.5:   # odd channel counts near the network ones
        c, k = max(1, c + rng.randint(-3, 3)), max(1, k + rng.randint(-3, 3))
    return Problem.conv2d((rng.choice((1, 2, 3)), c, h, w), (k, c // groups, r, s), stride,
                          padding, dilation, groups, layout=rng.choice(LAYOUTS[2] + ("NCHW",)))


def ranks_problem(rng, tiny):
    """A problem of rank 1 to 3 in either layout, groups and depthwise among them."""
    rank, g = rng.choice((1, 2, 3)), rng.choice((1, 1, 1, 2, 3, "dw"))
    c = rng.choice((2, 3, 8)) if g == "dw" else rng.choice((1, 2, 3, 5, 8, 16)) * g
    groups, k = (c, c * rng.choice((1, 2))) if g == "dw" else (g, rng.choice((1, 2, 4, 7)) * g)
    most = (4 if rank == 3 else 10) if tiny else (12 if rank == 3 else 29)
    fil = [rng.choice((1, 1, 2, 3, 3, 5)) for _ in range(rank)]
    return Problem.convolution(
        (rng.choice((1, 2, 3)), c, *[rng.randint(1, most) for _ in range(rank)]),
        (k, c // groups, *fil), stride=[rng.choice((1, 1, 2, 3)) for _ in range(rank)],
        padding=[(rng.randint(0, f), rng.randint(0, f)) for f in fil],
        dilation=[rng.choice((1, 1, 1, 2)) for _ in range(rank)], groups=groups,
        layout=rng.choice(LAYOUTS[rank] + (LAYOUTS[rank][0],)))


def draw(rng, shapes, tiny):
    """One valid problem of ``shapes`` within its FLOP range, in a random direction."""
    low, high = (1e6, 3e8) if shapes == "mid" else (0, 2e5 if tiny else 1e7 if shapes ==
                                                     "ranks" else 2e7)
    while True:
        try:
            problem = (ranks_problem(rng, tiny) if shapes == "ranks"
                       else corpus_problem(rng, 1 if shapes == "mid" else 4))
        except ValueError:   # no output left
            continue
        if low <= problem.flops <= high:
            return problem.with_direction(rng.choice(("fwd", "bwd", "wrw")))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", choices=("small", "mid", "ranks"), default="small")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget-s", type=float, default=600)
    parser.add_argument("--gpu-configs", action="store_true")
    parser.add_argument("--oclgrind", type=int, default=0, metavar="N")
    args = parser.parse_args()
    rng, solvers = random.Random(args.seed), registry().solvers.values()
    if args.oclgrind:
        problems = [draw(rng, args.shapes, True) for _ in range(args.oclgrind)]
        for solver in solvers:
            try:
                count = check_solver(solver, problems=problems, sanitize=True,
                                     configs=len(problems), seed=args.seed)
                print(f"ok {solver.name}: {count} problems", flush=True)
            except AssertionError as exc:
                print(f"FAIL {exc}", flush=True)
        return
    handle = retyped(Handle(), "GPU") if args.gpu_configs else Handle()
    begin, checked, failed = time.time(), 0, 0
    while time.time() - begin < args.budget_s:
        problem = draw(rng, args.shapes, False)
        for solver in registry().candidates(problem)[0]:
            try:
                found = check_problem(solver, handle, problem, seed=args.seed, configs=1,
                                      limit_s=120)
            except Exception as exc:   # noqa: BLE001 - a raise is a failure to report
                found = [f"raised {exc!r}"]
            checked += 1
            if found:
                failed += 1
                print("FAIL", solver.name, problem.key(), found[:2], flush=True)
    print(f"done: {checked} checks, {failed} failures, {time.time() - begin:.0f} s")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
