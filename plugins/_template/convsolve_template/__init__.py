"""convsolve-template: a convsolve plugin (stamped by `convsolve new-plugin`)."""
from convsolve import hookimpl

from .direct_fwd import DirectFwd

__version__ = "0.1.0"
#: Solver API versions this plugin supports (a PEP 440 specifier).
CONVSOLVE_SOLVER_API = ">=2.1,<3"


@hookimpl
def convsolve_solvers():
    return [DirectFwd()]
