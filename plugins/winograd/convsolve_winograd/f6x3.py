"""winograd.F6x3: Winograd F(6x6, 3x3), output tiles of 6 x 6, transforms of 8 x 8."""
from .solver import WinogradSolver


class F6x3(WinogradSolver):
    name = "winograd.F6x3"
    m = 6
    #: Relative RMS error allowed against float64: README.md, "Numerics", has the measurements.
    tolerance = 3e-5
