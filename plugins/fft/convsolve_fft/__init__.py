"""convsolve-fft: convolutions through the plugin's own OpenCL FFTs, in all three directions."""
from convsolve import hookimpl

from .fft2d import Fft2d
from .tiled_fft import TiledFft

__version__ = "0.1.0"
#: Solver API versions this plugin supports.
CONVSOLVE_SOLVER_API = ">=2.3,<3"   # nonfinite = "spread" bounded to its planes (2.3)


@hookimpl
def convsolve_solvers():
    return [Fft2d(), TiledFft()]
