"""solver.py and configs.py: the config space, device-class defaults, device checks, configs
drawn from the space against the reference, the numerical policy, and discovery."""
import types

import convsolve
import numpy as np
import pyopencl as cl
import pytest
from convsolve import Problem, tuning
from convsolve_fft import Fft2d, TiledFft, configs
from fft_checks import assert_matches

PROBLEMS = [((2, 3, 11, 9), (4, 3, 5, 4), (1, 2), ((2, 1), (1, 2)), 1, 1),
            ((1, 4, 40, 38), (4, 2, 3, 3), 1, 1, (1, 2), 2)]


def _device(name, version, vector, kind=cl.device_type.CPU):
    return types.SimpleNamespace(name=name, version=version, vendor="Acme",
                                 native_vector_width_float=vector, type=kind)


def test_space_is_modest_and_holds_every_default(handle):
    """The space is data (tens to a few hundred configs) and every device class's default is in
    it; AVX-512 gets 16-wide vectors, AVX2 8-wide, GPUs one lane per work-item."""
    space = Fft2d().config_space(None, handle)
    assert 50 <= len(list(space)) <= 500
    for config in configs.DEFAULT_CONFIGS.values():
        assert space.refusal(config) is None
    avx512 = _device("x", "OpenCL 3.0 PoCL HSTR: pthread-x86_64-pc-linux-gnu-skylake-avx512", 16)
    avx2 = _device("y", "OpenCL 3.0 PoCL HSTR: pthread-x86_64-pc-linux-gnu-haswell", 8)
    gpu = _device("z", "OpenCL 3.0 CUDA", 1, cl.device_type.GPU)
    assert tuning.pick(configs.DEFAULT_CONFIGS, avx512)["LANES"] == 16
    assert tuning.pick(configs.DEFAULT_CONFIGS, avx512)["GV"] == 16
    assert tuning.pick(configs.DEFAULT_CONFIGS, avx2)["LANES"] == 8
    assert tuning.pick(configs.DEFAULT_CONFIGS, avx2)["GV"] == 8
    assert tuning.pick(configs.DEFAULT_CONFIGS, gpu)["LANES"] == 1
    gpu_default = configs.DEFAULT_CONFIGS["gpu"]
    assert space.refusal(dict(gpu_default, LANES=16)) is not None   # lanes and WG


def _gpu_handle(local_mem_size, max_work_group_size):
    """A handle-like object for the config hooks: a GPU with these limits (no device behind)."""
    device = types.SimpleNamespace(**vars(_device("z", "OpenCL 3.0 CUDA", 1, cl.device_type.GPU)),
                                   local_mem_size=local_mem_size,
                                   max_work_group_size=max_work_group_size)
    return types.SimpleNamespace(device=device, is_gpu=True)


def test_device_limits_shape_the_space_and_the_default(handle):
    """Work-groups larger than the device takes are not in its space nor its default (the CPU
    shape, groups of one, instead), and check_config names them; local memory refuses no config
    (a plane too large for it goes through global memory: test_fft2d.py), so the H200's default
    is valid on an image whose transforms need 232 KiB."""
    problem = Problem.conv2d((1, 2, 30, 30), (2, 2, 5, 5))
    small = _gpu_handle(local_mem_size=1024, max_work_group_size=32)
    space, config = Fft2d().config_space(problem, small), Fft2d().default_config(problem, small)
    assert space.refusal(config) is None and not Fft2d().check_config(problem, small, config)
    assert all(c["WG"] <= 32 and c["GL"] <= 32 for c in space)
    reasons = Fft2d().check_config(problem, small, configs.DEFAULT_CONFIGS["gpu"])
    assert any("WG=64" in r for r in reasons) and any("GL=64" in r for r in reasons)
    h200 = _gpu_handle(local_mem_size=48 << 10, max_work_group_size=1024)
    large = Problem.conv2d((1, 1, 224, 224), (1, 1, 3, 3), padding=1)
    assert Fft2d().default_config(large, h200) == configs.DEFAULT_CONFIGS["gpu"]
    assert not Fft2d().check_config(large, h200, configs.DEFAULT_CONFIGS["gpu"])
    assert not Fft2d().check_config(problem, handle, Fft2d().default_config(problem, handle))


@pytest.mark.parametrize("config", [
    {"LANES": 1, "WG": 64, "RADIX4": 0, "STREAM": 0, "GV": 1, "TM": 1, "TN": 4, "GL": 64},
    {"LANES": 8, "WG": 1, "RADIX4": 1, "STREAM": 1, "GV": 8, "TM": 2, "TN": 3, "GL": 1},
    *convsolve.ConfigSpace(configs.CONFIG_SPACE, configs.CONFIG_CONSTRAINTS).sample(2)],
    ids=lambda c: "-".join(map(str, c.values())))
def test_configs_from_the_space_are_correct(handle, config):
    """Configs of both shapes (GPU: lanes over work-items; CPU: vector lanes) and drawn at
    random give the reference's result in every direction, whole-image and tiled."""
    assert assert_matches(handle, Fft2d(), PROBLEMS, config) == 6
    assert assert_matches(handle, TiledFft(), PROBLEMS[1:], config) == 3


def test_numerical_policy_excludes_fft(handle):
    """The FFT solvers declare their measured tolerance, so a max_tolerance below it leaves them
    out, and one above it lets them run."""
    assert 1e-6 < Fft2d.tolerance == TiledFft.tolerance <= 1e-5
    x, w = np.ones((1, 2, 8, 8), np.float32), np.ones((2, 2, 5, 5), np.float32)
    y = convsolve.conv2d(x, w, padding=2, solver="fft.Fft2d", handle=handle, max_tolerance=1e-5)
    assert y[0, 0, 4, 4] == pytest.approx(50, rel=1e-5)
    with pytest.raises(convsolve.ConvsolveError, match="numerical policy"):
        convsolve.conv2d(x, w, padding=2, solver="fft.Fft2d", handle=handle, max_tolerance=1e-6)


def test_discovered_with_wti_in_range():
    """Both solvers load through the entry point; WTI is in (0, 1], higher for larger filters
    on many channels than for a 1x1."""
    names = set(convsolve.registry().solvers)
    assert {"fft.Fft2d", "fft.TiledFft"} <= names
    big = Problem.conv2d((8, 128, 28, 28), (128, 128, 7, 7), padding=3)
    small = Problem.conv2d((8, 128, 28, 28), (128, 128, 1, 1))
    assert 0 < Fft2d().get_wti(small) < Fft2d().get_wti(big) <= 1
