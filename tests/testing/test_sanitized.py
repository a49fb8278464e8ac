"""Sanitised kernels: every solver of every installed plugin runs clean under Oclgrind, in
every spatial rank and layout it claims.

Marked ``sanitized`` (``-m sanitized`` runs only these, ``-m "not sanitized"`` leaves them out).
Each solver of each installed plugin goes through ``check_solver(..., sanitize=True)`` on a few
of sanitized_problems() for each direction it serves (chosen(): they cover what the set holds,
at least one each), with one random config besides the default: in convsolve.testing.isolation's
worker processes on Oclgrind, once as a CPU and once as a GPU (so both code paths of plugins
that choose by device type run), with Oclgrind's memory, data-race and API checks
(core/testing/isolation.py says which and why).  Any Oclgrind report fails, named by solver,
problem and config, as does a check_solver failure.  tests/fake_plugins/cs_unsafe.py and
cs_lies.py plant the faults that prove it.
"""
import importlib.metadata

import pytest
from convsolve import Problem, registry
from convsolve.solvers.registry import ENTRY_POINT_GROUP
from convsolve.testing import check_solver, claimed_problems, sanitized_problems

pytestmark = pytest.mark.sanitized

#: Random configs per solver under Oclgrind besides the default (check_solver's default is 3):
#: one, on a problem drawn at random from those chosen; `pytest --convsolve-sanitize` runs a
#: plugin's whole check_solver set on Oclgrind, and its PoCL tests check more configs.
SAMPLED_CONFIGS = 1
#: A (solver, direction) pair runs one in SHARE of the sanitized problems it accepts (at least
#: one), which keeps the five families' Oclgrind runs (about 90 problems and 17 configs per
#: device profile) within the suite's 10-minute budget on 2 cores.
SHARE = 4
#: What a problem exercises, so that the few chosen cover much.
FEATURES = {
    "batch": lambda p: p.n > 1,
    "stride": lambda p: max(p.conv.strides) > 1,
    "dilation": lambda p: max(p.conv.dilations) > 1,
    "groups": lambda p: p.groups > 1,
    "depthwise": lambda p: p.groups == p.c > 1,
    "padding": lambda p: any(max(pads) > 0 for pads in p.conv.pads),
    "asymmetric padding": lambda p: any(a != b for a, b in p.conv.pads),
    "windows in the padding": lambda p: any(max(pads) >= size for pads, size in zip(
        p.conv.pads, (p.fil_h, p.fil_w))),
    "1x1": lambda p: p.fil_h == p.fil_w == 1,
    "non-square": lambda p: p.fil_h != p.fil_w or p.in_h != p.in_w,
    "outputs past a 64 tile": lambda p: p.out_h * p.out_w > 64,
    "channels past a 64 tile": lambda p: max(p.k, p.c) > 64,
    "a reduction past 256": lambda p: reduction(p) > 256,
}

#: Tiny problems for the planted faults: odd and even output sizes, a small and a large stride.
TINY = [Problem.conv2d((1, 2, 3, 3), (3, 2, 1, 1)), Problem.conv2d((1, 2, 4, 4), (2, 2, 1, 1))]
STRIDED = [Problem.conv2d((1, 2, 6, 6), (3, 2, 1, 1), 2),
           Problem.conv2d((1, 2, 64, 64), (3, 2, 1, 1), 4)]
#: For cs_unsafe.ReadsPastInput: 3 channels (it reads one plane past x), then 4 (none).
OVERREAD = [Problem.conv2d((1, 3, 3, 3), (2, 3, 1, 1)), Problem.conv2d((1, 4, 3, 3), (2, 4, 1, 1))]


def reduction(problem):
    """How many products each output element of ``problem`` sums."""
    p, taps = problem, problem.fil_h * problem.fil_w
    return {"fwd": p.c // p.groups * taps, "bwd": p.k // p.groups * taps}.get(
        p.direction.value, p.n * p.out_h * p.out_w)


def features(problem):
    return {name for name, test in FEATURES.items() if test(problem)}


def chosen(solver, direction):
    """The sanitized problems of ``direction`` that ``solver`` runs under Oclgrind: one in
    SHARE of those it accepts (at least one), each adding the most FEATURES the earlier ones
    lack, the cheapest of equals."""
    left = [p for p in sanitized_problems((direction,)) if solver.is_applicable(p)]
    picked, covered = [], set()
    for _ in range(-(-len(left) // SHARE)):
        best = max(left, key=lambda p: (len(features(p) - covered), -p.flops))
        picked.append(best)
        left.remove(best)
        covered |= features(best)
    return picked


def other_ranks(solver, direction):
    """The problems of other spatial ranks and layouts that ``solver`` runs under Oclgrind in
    ``direction``: the first of claimed_problems() in each rank and layout choice it claims."""
    first = {}
    for problem in claimed_problems(solver, (direction,)):
        if solver.is_applicable(problem):
            first.setdefault((problem.spatial_dims, problem.layouts), problem)
    return list(first.values())


def installed_plugins():
    return sorted({ep.name for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)})


def plan(plugin, monkeypatch):
    """{solver name: (solver, {direction: the problems chosen()})} of ``plugin``'s solvers."""
    monkeypatch.setenv("CONVSOLVE_PLUGINS", plugin)
    return {name: (solver, {d: chosen(solver, d) + other_ranks(solver, d)
                            for d in solver.directions})
            for name, solver in registry().solvers.items()}


def failures(solver, problems):
    """check_solver's failures of ``solver`` on Oclgrind, one string each (none: [])."""
    try:
        check_solver(solver, None, problems, configs=SAMPLED_CONFIGS, sanitize=True)
    except AssertionError as exc:
        return str(exc).split("\n  ")[1:]
    return []


@pytest.mark.parametrize("plugin", installed_plugins())
def test_every_solver_and_direction_runs_under_oclgrind(plugin, monkeypatch):
    """The problems that run under Oclgrind include at least one of every (solver, direction)
    pair of an installed plugin, and stay few: about a quarter of what it accepts, and one
    problem of each other spatial rank and layout choice the solver claims (those with
    channels-last x only, for a solver that accepts no channels-first problem: a channels-last
    one, such as direct.DepthwiseNhwc, which claims channels-first layouts for w alone)."""
    solvers = plan(plugin, monkeypatch)
    assert solvers, f"plugin {plugin!r} registers no solvers"
    for name, (solver, runs) in solvers.items():
        for direction, problems in runs.items():
            others = other_ranks(solver, direction)
            problems = problems[:len(problems) - len(others)]
            assert {(p.spatial_dims, p.layouts) for p in others} == {
                (p.spatial_dims, p.layouts) for p in claimed_problems(solver, (direction,))
                if problems or p.x.channels_last}
            accepted = [p for p in sanitized_problems((direction,)) if solver.is_applicable(p)]
            assert problems or others, (f"{name} {direction.value}: accepts none of the "
                                        "sanitized or claimed problems")
            assert len(problems) == -(-len(accepted) // SHARE)
            assert len({p.key() for p in problems}) == len(problems)
            assert all(p.direction is direction and p in accepted for p in problems)


@pytest.mark.parametrize("plugin", installed_plugins())
def test_plugin_kernels_are_clean_under_oclgrind(plugin, monkeypatch):
    """Every solver of an installed plugin, in every direction it serves (the problems of
    chosen()), passes check_solver on Oclgrind with one random config besides the default, with
    no invalid access, data race or API error reported."""
    found = [f"{name}: {line}" for name, (solver, runs) in plan(plugin, monkeypatch).items()
             for line in failures(solver, [p for problems in runs.values() for p in problems])]
    assert not found, f"{len(found)} findings under Oclgrind:\n" + "\n".join(
        text[:1500] for text in found)


def test_planted_memory_faults_are_caught():
    """A race on a __local variable that leaves the results right fails on Oclgrind with its
    report, named by problem; so do writes one element past the output (always, or on odd
    sizes only) and reads of a few floats past the input (whose values meet zero weights, so
    the results are right): buffers have their exact sizes there, no guard zone; a stride
    lie's far write is Oclgrind's 'Invalid write', named by the problem; each as a CPU and as
    a GPU."""
    import cs_lies
    import cs_unsafe
    race = failures(cs_unsafe.LocalRace(), TINY)
    assert len(race) == 4 and all("Oclgrind: Write-write data race at local memory" in text
                                  and "Kernel: local_race_fwd" in text for text in race)
    for solver, problems, faulty, access in (
            (cs_unsafe.WritesPastOutput(), TINY, TINY, "write"),
            (cs_unsafe.PairsPastOddOutput(), TINY, TINY[:1], "write"),
            (cs_unsafe.ReadsPastInput(), OVERREAD, OVERREAD[:1], "read")):
        found = [text for text in failures(solver, problems)
                 if f"Oclgrind: Invalid {access} of size 4 at global memory" in text]
        assert [text.split(": Oclgrind")[0] for text in found] == [
            f"on Oclgrind as a {profile}: {p.key()}" for profile in ("CPU", "GPU")
            for p in faulty], found
    lie = failures(cs_lies.StrideLie(), STRIDED)
    assert any(text.startswith(f"on Oclgrind as a GPU: {STRIDED[1].key()}: Oclgrind: Invalid "
                               "write of size 4 at global memory") for text in lie)
