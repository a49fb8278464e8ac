"""Sanitised kernels: every solver of every installed plugin runs clean under Oclgrind.

Marked ``sanitized`` (``-m sanitized`` runs only these, ``-m "not sanitized"`` leaves them out).
Each solver of each installed plugin goes through ``check_solver(..., sanitize=True)`` on
sanitized_problems() of the directions it serves: in convsolve.testing.isolation's worker processes
on Oclgrind, once as a CPU and once as a GPU (so both code paths of plugins that choose by device
type run), with Oclgrind's memory, data-race and API checks (core/testing/isolation.py says which and
why).  Any Oclgrind report fails, named by solver, problem and config, as does a check_solver
failure.  tests/fake_plugins/cs_unsafe.py and cs_lies.py plant the faults that prove it.
"""
import importlib.metadata

import pytest
from convsolve import Problem, registry
from convsolve.solvers.registry import ENTRY_POINT_GROUP
from convsolve.testing import check_solver, sanitized_problems

pytestmark = pytest.mark.sanitized

#: Random configs per solver under Oclgrind besides the default (check_solver's default is 3).
#: None, on every third sanitized problem (each direction keeps several), keeps the five
#: families' Oclgrind runs within the suite's 10-minute budget on 2 cores with cold kernel
#: caches; the plugins' PoCL tests check sampled configs, and `pytest --convsolve-sanitize`
#: runs a plugin's whole check_solver set on Oclgrind.
SAMPLED_CONFIGS = 0

#: Tiny problems for the planted faults: odd and even output sizes, a small and a large stride.
TINY = [Problem.conv2d((1, 2, 3, 3), (3, 2, 1, 1)), Problem.conv2d((1, 2, 4, 4), (2, 2, 1, 1))]
STRIDED = [Problem.conv2d((1, 2, 6, 6), (3, 2, 1, 1), 2),
           Problem.conv2d((1, 2, 64, 64), (3, 2, 1, 1), 4)]
#: For cs_unsafe.ReadsPastInput: 3 channels (it reads one plane past x), then 4 (none).
OVERREAD = [Problem.conv2d((1, 3, 3, 3), (2, 3, 1, 1)), Problem.conv2d((1, 4, 3, 3), (2, 4, 1, 1))]


def installed_plugins():
    return sorted({ep.name for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)})


def failures(solver, problems):
    """check_solver's failures of ``solver`` on Oclgrind, one string each (none: [])."""
    try:
        check_solver(solver, None, problems, configs=SAMPLED_CONFIGS, sanitize=True)
    except AssertionError as exc:
        return str(exc).split("\n  ")[1:]
    return []


@pytest.mark.parametrize("plugin", installed_plugins())
def test_plugin_kernels_are_clean_under_oclgrind(plugin, monkeypatch):
    """Every solver of an installed plugin, in every direction it serves, passes check_solver
    on Oclgrind with no invalid access, data race or API error reported."""
    monkeypatch.setenv("CONVSOLVE_PLUGINS", plugin)
    solvers = registry().solvers
    assert solvers, f"plugin {plugin!r} registers no solvers"
    unchecked = [f"{name} {direction.value}" for name, solver in solvers.items()
                 for direction in solver.directions
                 if not any(map(solver.is_applicable, sanitized_problems((direction,))))]
    assert not unchecked, "applicable to none of the sanitized problems: " + ", ".join(unchecked)
    found = [f"{name}: {line}" for name, solver in solvers.items()
             for line in failures(solver, sanitized_problems(tuple(solver.directions))[::3])]
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
