"""winograd.F2x3: Winograd F(2x2, 3x3), output tiles of 2 x 2, transforms of 4 x 4."""
from .solver import WinogradSolver


class F2x3(WinogradSolver):
    name = "winograd.F2x3"
    m = 2
    #: Relative RMS error allowed against float64: README.md, "Numerics", has the measurements.
    tolerance = 5e-6
