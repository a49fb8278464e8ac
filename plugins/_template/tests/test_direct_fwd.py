"""template.DirectFwd passes convsolve's conformance checks, on the device and on Oclgrind, and
is discovered."""
import convsolve
from convsolve import Problem
from convsolve.testing import check_solver
from convsolve_template import DirectFwd

#: A few tiny problems for Oclgrind (about 1000x slower than a CPU): odd sizes, padding, a
#: stride, groups, and a channel count that is not a multiple of TILE_K.
TINY = [Problem.conv2d((1, 3, 5, 4), (5, 3, 3, 3), padding=1),
        Problem.conv2d((2, 4, 6, 5), (6, 2, 3, 2), stride=2, groups=2)]


def test_conformance(handle):
    """The solver honours the contract on convsolve's standard problem set."""
    assert check_solver(DirectFwd(), handle) > 0


def test_clean_under_oclgrind():
    """No access out of bounds, data race or API error on Oclgrind (skipped without it)."""
    assert check_solver(DirectFwd(), problems=TINY, sanitize=True) == len(TINY)


def test_discovered_through_its_entry_point():
    """The installed plugin's solver is registered with convsolve."""
    assert "template.DirectFwd" in convsolve.registry().solvers
