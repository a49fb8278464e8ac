"""convsolve-examples: the examples of docs/hooks.md as a plugin that works.

Every example in docs/hooks.md is text of these files (it comes from the docstrings of
core/hookspecs.py), and tests/cli/test_docgen.py checks that and runs each solver through
check_solver, so an example can never accept what it cannot compute.
"""
from convsolve import hookimpl

from .im2col import Im2Col
from .pointwise import Pointwise

#: Solver API versions this plugin supports (a PEP 440 specifier): 2.1 brought tunable solvers,
#: 2.2 fused epilogues, 2.4 constant weights.
CONVSOLVE_SOLVER_API = ">=2.4,<3"   # fused_stages (2.3), build_packing (2.4)


@hookimpl
def convsolve_solvers():
    return [Pointwise(), Im2Col()]
