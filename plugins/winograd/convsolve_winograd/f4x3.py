"""winograd.F4x3: Winograd F(4x4, 3x3), output tiles of 4 x 4, transforms of 6 x 6."""
from .solver import WinogradSolver


class F4x3(WinogradSolver):
    name = "winograd.F4x3"
    m = 4
    #: Relative RMS error allowed against float64: README.md, "Numerics", has the measurements.
    tolerance = 1e-5
