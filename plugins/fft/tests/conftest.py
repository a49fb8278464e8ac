"""FFT tests: check_solver with the family's non-finite semantics (fft_checks.py)."""
import pytest
from convsolve import testing as cs_testing
from fft_checks import nonfinite_failures


@pytest.fixture
def fft_semantics(monkeypatch):
    """check_solver's exact NaN/inf check replaced by the FFT family's (fft_checks.py)."""
    monkeypatch.setattr(cs_testing, "_check_nonfinite", nonfinite_failures)
