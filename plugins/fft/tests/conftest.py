"""FFT tests' fixtures: the FFT family's non-finite semantics, and the device with lower limits."""
import pytest
from convsolve import testing as cs_testing
from fft_checks import nonfinite_failures


@pytest.fixture
def fft_semantics(monkeypatch):
    """check_solver's exact NaN/inf check replaced by the FFT family's (fft_checks.py)."""
    monkeypatch.setattr(cs_testing, "_check_nonfinite", nonfinite_failures)


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
