"""Fixtures of the direct plugin's tests: handles that look like other device classes."""
from types import SimpleNamespace

import pyopencl as cl
import pytest

#: (device type, name, PoCL version string, vendor, native float vector width) per class.
_DEVICES = {
    "avx512": (cl.device_type.CPU, "pthread-skylake-avx512-Some CPU",
               "OpenCL 3.0 PoCL 3.1 HSTR: pthread-x86_64-pc-linux-gnu-skylake-avx512", "Intel",
               16),
    "avx2": (cl.device_type.CPU, "pthread-haswell-Some CPU",
             "OpenCL 3.0 PoCL 3.1 HSTR: pthread-x86_64-pc-linux-gnu-haswell", "AMD", 8),
    "gpu": (cl.device_type.GPU, "NVIDIA H200", "OpenCL 3.0 CUDA", "NVIDIA Corporation", 1),
}


@pytest.fixture
def fake_handle():
    """fake_handle(kind) -> an object with the handle attributes the config hooks read, for an
    AVX-512 CPU, an AVX2 CPU or a GPU (no device behind it)."""
    def make(kind):
        kind_type, name, version, vendor, width = _DEVICES[kind]
        device = SimpleNamespace(type=kind_type, name=name, version=version, vendor=vendor,
                                 native_vector_width_float=width,
                                 max_work_group_size=1024 if kind == "gpu" else 4096,
                                 local_mem_size=48 << 10 if kind == "gpu" else 1 << 20,
                                 max_compute_units=132 if kind == "gpu" else 2)
        return SimpleNamespace(device=device, is_gpu=kind == "gpu")
    return make
