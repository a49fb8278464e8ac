"""FFT tests' fixtures: the test device's handle reporting lower limits."""
import pytest


class Limited:
    """``inner`` as it answers, but for the attributes given (a device's limits)."""

    def __init__(self, inner, **limits):
        self._inner, self._limits = inner, limits

    def __getattr__(self, name):
        return self._limits[name] if name in self._limits else getattr(self._inner, name)


@pytest.fixture
def limited_handle(handle):
    """limited_handle(local_mem_size=..., ...) -> the test device's handle, its device reporting
    those limits to the solvers (the kernels run on the real device)."""
    return lambda **limits: Limited(handle, device=Limited(handle.device, **limits))
