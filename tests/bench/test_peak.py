"""Tests of the measured device peak: FMA and copy arithmetic, configurations, a measurement."""
import pytest
from convsolve import Handle
from convsolve.bench import peak
from convsolve.testing import fake_device


def test_peak_arithmetic():
    """FMA launches count 2 flops per lane per chain per iteration; a copy reads and writes."""
    assert peak.fma_flops(1024, 8, 12, 1000) == 2 * 1024 * 8 * 12 * 1000
    assert peak.copy_bytes(1 << 20) == 8 << 20
    assert peak.rate(2e9, 1000.0) == pytest.approx(2.0)
    assert peak.rate(1, 0) == 0.0


def test_fma_configs():
    """CPUs get explicit vectors of their preferred width, GPUs short ones."""
    cpu, gpu = fake_device("avx2"), fake_device("gpu")   # preferred float vectors: 8 and 1
    assert all(width == 8 for width, _ in peak.fma_configs(cpu))
    assert peak.fma_configs(gpu) == peak.GPU_FMA_CONFIGS


def test_measure_peak(isolated):
    """The measured peak is positive and names the winning configuration, also in words."""
    measured = peak.measure_peak(Handle(), target_ms=5.0)
    assert measured["gflops"] > 0 and measured["gbps"] > 0
    fma = measured["fma"]
    assert f"{fma['PEAK_VW']}x{fma['PEAK_CHAINS']}" in fma["all"]
    assert measured["how"] == (f"measured: float{fma['PEAK_VW']} x {fma['PEAK_CHAINS']} chains, "
                               f"best of {peak.SAMPLES}")
