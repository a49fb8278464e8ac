"""Problem corpora for training and evaluating the solver ranking: network layers and a sweep.

Two sources, both deterministic: the layers of the shipped suites (ResNet-50, VGG-16,
MobileNet-v2, DeepBench) at chosen batches, and a seeded random sweep of what users run beyond
them (odd sizes, non-square images and filters, strides, dilations, asymmetric pads, groups,
depthwise, few and many channels, batch 1-64).  Every problem comes in each chosen direction.
"""
import random

from ..problem import Direction, Problem
from .command import layer_problem, load_suite

NETWORK_SUITES = ("resnet50", "vgg16", "mobilenet_v2", "deepbench")
_CHANNELS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 160, 192, 256, 320, 384, 512,
             768, 1024)
_FILTERS = ((1, 1),) * 4 + ((3, 3),) * 6 + ((5, 5),) * 2 + ((7, 7),) * 2 + (
    (1, 3), (3, 1), (1, 7), (7, 1), (2, 2), (5, 3), (4, 4), (11, 11))
_BATCHES = (1, 1, 2, 4, 8, 16, 32, 64)


def network_problems(batches, directions):
    """The shipped suites' layers at each of ``batches`` (DeepBench's at their own n too)."""
    problems = []
    for name in NETWORK_SUITES:
        for layer in load_suite(name)["layers"]:
            sizes = set(batches) | ({layer["n"]} if "n" in layer else set())
            problems += [layer_problem(layer, n, d) for n in sorted(sizes) for d in directions]
    return problems


def sweep_geometry(rng):
    """One random (n, c, h, w, k, r, s, stride, padding, dilation, groups) of the sweep."""
    r, s = rng.choice(_FILTERS)
    kind = rng.random()
    c, k = rng.choice(_CHANNELS), rng.choice(_CHANNELS)
    groups = 1
    if kind < 0.12:                                   # depthwise, multiplier 1 or 2
        groups, k = c, c * rng.choice((1, 1, 1, 2))
    elif kind < 0.22:
        groups = rng.choice((2, 4, 8, 32))
        c, k = max(c // groups, 1) * groups, max(k // groups, 1) * groups
    h = round(2 ** rng.uniform(2, 7.3))
    w = h if rng.random() < 0.7 else round(2 ** rng.uniform(2, 7.3))
    step = rng.choice((1, 1, 1, 1, 2, 2, 3))
    stride = (step, step if rng.random() < 0.9 else rng.choice((1, 2)))
    spread = rng.choice((1,) * 8 + (2, 3))
    dilation = (spread, spread)
    same = ((dilation[0] * (r - 1)) // 2, (dilation[1] * (s - 1)) // 2)
    pad = rng.random()
    if pad < 0.6:
        padding = same
    elif pad < 0.8:
        padding = (0, 0)
    else:
        padding = tuple((rng.randint(0, t), rng.randint(0, t)) for t in (r, s))
    return rng.choice(_BATCHES), c, h, w, k, r, s, stride, padding, dilation, groups


def sweep_problems(count, directions, seed=0, max_gflop=4.0, max_mib=256):
    """``count`` random problems (each in every direction) of at most ``max_gflop`` GFLOP and
    ``max_mib`` MiB in their largest tensor."""
    rng, problems, seen = random.Random(seed), [], set()
    while len(seen) < count:
        n, c, h, w, k, r, s, stride, padding, dilation, groups = sweep_geometry(rng)
        try:
            problem = Problem.conv2d((n, c, h, w), (k, c // groups, r, s), stride=stride,
                                     padding=padding, dilation=dilation, groups=groups)
        except ValueError:   # no output left (a filter larger than the padded image)
            continue
        largest = max(problem.x.nbytes, problem.w.nbytes, problem.y.nbytes)
        if problem.flops > max_gflop * 1e9 or largest > max_mib * 2 ** 20 \
                or problem.key() in seen:
            continue
        seen.add(problem.key())
        problems += [problem.with_direction(d) for d in directions]
    return problems


def corpus(names, batches, directions, sweep_count, seed=0, max_gflop=4.0):
    """The problems of the named corpora ('networks', 'sweep'), without repeats, in order; the
    networks' too are held to ``max_gflop``."""
    directions = [Direction.parse(d) for d in directions]
    problems = []
    if "networks" in names:
        problems += [p for p in network_problems(batches, directions)
                     if p.flops <= max_gflop * 1e9]
    if "sweep" in names:
        problems += sweep_problems(sweep_count, directions, seed, max_gflop)
    return list({p.key(): p for p in problems}.values())
