"""template.DirectFwd passes convsolve's conformance checks and is discovered."""
import convsolve
from convsolve.testing import check_solver
from convsolve_template import DirectFwd


def test_conformance(handle):
    """The solver honours the contract on convsolve's standard problem set."""
    assert check_solver(DirectFwd(), handle) > 0


def test_discovered_through_its_entry_point():
    """The installed plugin's solver is registered with convsolve."""
    assert "template.DirectFwd" in convsolve.registry().solvers
