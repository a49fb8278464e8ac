"""convsolve.heuristics.features: device facts and a problem's features, a pure function."""
import dataclasses

import numpy as np
import pytest
from convsolve import Problem, ValidationError
from convsolve.heuristics import FEATURE_NAMES, DeviceFacts, problem_features
from synthetic_corpus import DEVICE, problems

BASE = {"x_shape": (2, 8, 16, 16), "w_shape": (16, 8, 3, 3), "stride": 1, "padding": 1}


def conv(**change):
    """The base problem with some arguments of Problem.conv2d changed."""
    return Problem.conv2d(**{**BASE, **change})


def device(**change):
    return dataclasses.replace(DEVICE, **change)


#: For each feature, an input that differs from (BASE, DEVICE) in that feature's field.
VARIANTS = {
    "log_n": conv(x_shape=(4, 8, 16, 16)),
    "log_c": conv(x_shape=(2, 16, 16, 16), w_shape=(16, 16, 3, 3)),
    "log_k": conv(w_shape=(32, 8, 3, 3)),
    "log_in_h": conv(x_shape=(2, 8, 32, 16)),
    "log_in_w": conv(x_shape=(2, 8, 16, 32)),
    "log_out_h": conv(stride=(2, 1)),
    "log_out_w": conv(stride=(1, 2)),
    "log_groups": conv(w_shape=(16, 4, 3, 3), groups=2),
    "log_c_per_group": conv(w_shape=(16, 4, 3, 3), groups=2),
    "log_k_per_group": conv(w_shape=(16, 4, 3, 3), groups=2),
    "log_flops": conv(w_shape=(32, 8, 3, 3)),
    "log_bytes": conv(w_shape=(32, 8, 3, 3)),
    "log_intensity": conv(x_shape=(8, 8, 16, 16)),
    "log_gemm_m": conv(x_shape=(4, 8, 16, 16)),
    "log_gemm_n": conv(w_shape=(32, 8, 3, 3)),
    "log_gemm_k": conv(x_shape=(2, 16, 16, 16), w_shape=(16, 16, 3, 3)),
    "log_weights": conv(w_shape=(32, 8, 3, 3)),
    "fil_h": conv(w_shape=(16, 8, 5, 3), padding=(2, 1)),
    "fil_w": conv(w_shape=(16, 8, 3, 5), padding=(1, 2)),
    "pad_h": conv(padding=(2, 1)),
    "pad_w": conv(padding=(1, 2)),
    "pad_asym_h": conv(padding=((0, 2), (1, 1))),
    "pad_asym_w": conv(padding=((1, 1), (2, 0))),
    "stride_h": conv(stride=(2, 1)),
    "stride_w": conv(stride=(1, 2)),
    "dilation_h": conv(dilation=(2, 1)),
    "dilation_w": conv(dilation=(1, 2)),
    "is_1x1": conv(w_shape=(16, 8, 1, 1), padding=0),
    "is_3x3": conv(w_shape=(16, 8, 5, 5), padding=2),
    "is_depthwise": conv(w_shape=(8, 1, 3, 3), groups=8),
    "is_grouped": conv(w_shape=(16, 4, 3, 3), groups=2),
    "dir_fwd": conv(direction="bwd"),
    "dir_bwd": conv(direction="bwd"),
    "dir_wrw": conv(direction="wrw"),
    "align_c_per_group": conv(x_shape=(2, 12, 16, 16), w_shape=(16, 12, 3, 3)),
    "align_k_per_group": conv(w_shape=(24, 8, 3, 3)),
    "align_nhw": conv(x_shape=(2, 8, 15, 15)),
    "log_tiles_f2": conv(x_shape=(2, 8, 20, 20)),
    "log_tiles_f4": conv(x_shape=(2, 8, 20, 20)),
    "log_tiles_f6": conv(x_shape=(2, 8, 20, 20)),
    "log_gemm_tiles": conv(w_shape=(64, 8, 3, 3)),
    "gemm_fill": conv(w_shape=(20, 8, 3, 3)),
    "ratio_in": conv(x_shape=(2, 8, 32, 32)),
    "ratio_out": conv(stride=2),
    "ratio_k_c": conv(w_shape=(32, 8, 3, 3)),
    "log_compute_units": device(compute_units=32),
    "log_vector_width": device(vector_width=16),
    "is_gpu": device(is_gpu=True),
    "log_local_mem": device(local_mem_bytes=32768),
    "log_flops_per_cu": device(compute_units=64),
    "log_gemm_tiles_per_cu": device(compute_units=64),
}


def test_features_are_a_pure_function_of_problem_and_device():
    """The same problem (also rebuilt from its key) and device give the same float64 vector of
    len(FEATURE_NAMES), every entry finite, over a varied corpus; calls leave nothing behind."""
    for problem in problems(60, 3):
        first = problem_features(problem, DEVICE)
        again = problem_features(Problem.from_key(problem.key()), DeviceFacts(**vars(DEVICE)))
        assert first.dtype == np.float64 and first.shape == (len(FEATURE_NAMES),)
        assert np.isfinite(first).all() and np.array_equal(first, again), problem
    assert len(set(FEATURE_NAMES)) == len(FEATURE_NAMES)


@pytest.mark.parametrize("name", FEATURE_NAMES)
def test_each_feature_responds_to_its_field(name):
    """Changing the field a feature describes changes that feature."""
    variant = VARIANTS[name]
    problem, facts = (variant, DEVICE) if isinstance(variant, Problem) else (conv(), variant)
    index = FEATURE_NAMES.index(name)
    assert problem_features(problem, facts)[index] != problem_features(conv(), DEVICE)[index]


def test_every_feature_has_a_variant():
    assert set(VARIANTS) == set(FEATURE_NAMES)


def test_implicit_gemm_sizes_follow_the_direction():
    """N=2, C=8, K=16, 10x10, 3x3, pad 1, stride 2 (5x5 out), 2 groups (C/g 4, K/g 8): fwd M =
    N*OH*OW, N = K/g, K = C/g*R*S; bwd M = N*H*W, N = C/g, K = K/g*R*S; wrw M = K/g,
    N = C/g*R*S, K = N*OH*OW."""
    expected = {"fwd": (50, 8, 36), "bwd": (200, 4, 72), "wrw": (8, 36, 50)}
    columns = [FEATURE_NAMES.index(f"log_gemm_{axis}") for axis in "mnk"]
    for direction, sizes in expected.items():
        problem = Problem.conv2d((2, 8, 10, 10), (16, 4, 3, 3), 2, 1, groups=2,
                                 direction=direction)
        found = 2 ** problem_features(problem, DEVICE)[columns]
        assert np.allclose(found, sizes), (direction, found)


def test_device_facts_from_dict_and_back():
    """to_dict and from_dict round-trip; a header's device (type instead of is_gpu, extra keys)
    reads; a missing or wrong field is a ValidationError naming it."""
    assert DeviceFacts.from_dict(DEVICE.to_dict()) == DEVICE
    header = {**DEVICE.to_dict(), "name": "x", "keys": ["x", "*"], "type": "gpu"}
    del header["is_gpu"]
    assert DeviceFacts.from_dict(header).is_gpu is True
    with pytest.raises(ValidationError, match="device.compute_units"):
        DeviceFacts.from_dict({**DEVICE.to_dict(), "compute_units": 0})
    with pytest.raises(ValidationError, match="device.is_gpu"):
        DeviceFacts.from_dict({k: v for k, v in DEVICE.to_dict().items() if k != "is_gpu"})


def test_device_facts_from_an_opencl_device(handle):
    """from_cl reads the handle's device (PoCL in CI): positive sizes, a CPU is not a GPU."""
    facts = DeviceFacts.from_cl(handle.device)
    assert facts.compute_units == handle.device.max_compute_units
    assert facts.vector_width == handle.device.native_vector_width_float
    assert min(facts.local_mem_bytes, facts.max_work_group_size, facts.global_mem_bytes) > 0
    assert np.isfinite(problem_features(conv(), facts)).all()
