"""A synthetic device for the heuristics tests: solvers whose times follow known formulas."""
import numpy as np
from convsolve import Problem
from convsolve.heuristics import Dataset, DeviceFacts, Record

DEVICE = DeviceFacts(compute_units=16, vector_width=8, is_gpu=False, local_mem_bytes=65536,
                     max_work_group_size=1024, global_mem_bytes=8 << 30)


def problems(count, seed):
    """``count`` random valid problems: sizes, filters, strides, pads, dilations, depthwise
    groups and the three directions."""
    rng = np.random.default_rng(seed)
    found = []
    while len(found) < count:
        n = int(rng.choice([1, 2, 4, 8, 16, 32]))
        c, k = (int(v) for v in rng.choice([3, 8, 16, 24, 32, 64, 128, 256], 2))
        h = int(rng.choice([7, 8, 14, 17, 28, 32, 56]))
        fil = int(rng.choice([1, 1, 3, 3, 5, 7]))
        stride, dilation = int(rng.choice([1, 1, 2])), int(rng.choice([1, 1, 1, 2]))
        groups = c if rng.random() < 0.1 else 1
        k = c if groups > 1 else k
        pad = fil // 2 * dilation if rng.random() < 0.7 else 0
        if h + 2 * pad < (fil - 1) * dilation + 1:
            continue
        found.append(Problem.conv2d((n, c, h, h), (k, c // groups, fil, fil), stride, pad,
                                    dilation, groups, str(rng.choice(["fwd", "bwd", "wrw"]))))
    return found


def times(problem, fixed=1.0):
    """Each fake solver's time in ms: A costs flops, B a quarter of that plus ``fixed`` ms, C is
    fast on 1x1 filters only, and a naive kernel is ten times A."""
    units = problem.flops / 1e8
    one = problem.fil_h == problem.fil_w == 1
    return {"fake.A": units, "fake.B": units / 4 + fixed, "fake.C": units / (16 if one else 0.5),
            "direct.NaiveFwd": units * 10}


def corpus(count, seed, fixed=1.0, device=DEVICE):
    """A Dataset of ``count`` random problems timed by ``times``."""
    return Dataset(device, tuple(Record(p, times(p, fixed)) for p in problems(count, seed)),
                   {"device": {"name": "synthetic"}, "date": "2026-12-05"})
