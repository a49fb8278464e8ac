"""convsolve-implicit-gemm's fused epilogue: every stage in every direction, stored by the kernel
that writes each output element once (the GEMM; the sum of the splits when backward weights or
forward split), with both kernels, z being y; the workspace unchanged."""
import convsolve
import numpy as np
import pyopencl as cl
import pytest
from convsolve import Direction, Epilogue, Problem
from convsolve.testing import device_buffers, random_tensors, read_output
from convsolve_implicit_gemm import configs, plan
from test_implicit_gemm import OTHER_CONFIGS, solver, split_forward_anywhere

#: check_solver's "all" forward case and its backward one: the programs the tests share.
ALL = Epilogue(True, True, True, "leaky_relu", True)
BLEND = Epilogue(blend=True)
#: Stride, asymmetric padding, dilation, groups; 70 channels a group (rows in blocks of 32 or 8,
#: the last one partial, the second group's at an offset).  Backward weights with
#: MIN_SPLIT_DEPTH 40:
#: the first splits in 2 (the sum stores the epilogue), the second does not (the GEMM does).
PROBLEMS = [
    Problem.conv2d((2, 6, 9, 11), (8, 3, 3, 3), stride=(2, 1), padding=((1, 0), (2, 1)),
                   dilation=(1, 2), groups=2),
    Problem.conv2d((2, 4, 7, 9), (140, 2, 3, 2), stride=(1, 2), padding=((0, 1), (1, 0)),
                   groups=2),
]
SPLIT_DEPTH = 40


def epilogue_of(direction):
    return ALL if direction is Direction.FORWARD else BLEND


def test_fuses_every_stage_with_the_same_workspace(handle, monkeypatch):
    """Every direction fuses all of its epilogue, whatever the splits, and the workspace is the
    bare problem's."""
    monkeypatch.setattr(plan, "MIN_SPLIT_DEPTH", SPLIT_DEPTH)
    big = Problem.conv2d((8, 64, 56, 56), (64, 64, 3, 3), padding=1)   # backward weights: 57
    for direction in Direction:
        s = solver(direction)
        for problem in (*PROBLEMS, big):
            p = problem.with_direction(direction)
            for epilogue in (Epilogue(), epilogue_of(direction)):
                q = p.with_epilogue(epilogue)
                assert s.fused_stages(q) == len(epilogue.stages)
                assert s.workspace(q, handle) == s.workspace(p, handle)
    assert [plan.splits(p.with_direction("wrw")) for p in PROBLEMS] == [2, 1]


def fused_and_unfused(handle, problem, host, values):
    """The outputs of ``problem`` fused (the kernel's store) and unfused (the core's pass)
    through convsolve.run (its kept invokers are keyed by config, so each test's counts), z
    being the output where there is one."""
    name, found = solver(problem.direction).name, []
    for candidate in (name, name + "/unfused"):
        buffers = device_buffers(handle, host)
        z = {"z": buffers["y"]} if problem.epilogue.residual else {}
        convsolve.run(handle, problem, candidate, **buffers, **values, **z)
        found.append(read_output(handle, problem, buffers))
    return found


@pytest.mark.parametrize("config", [OTHER_CONFIGS[0], OTHER_CONFIGS[2]], ids=["gpu", "cpu"])
@pytest.mark.parametrize("direction", list(Direction), ids=lambda d: d.value)
def test_fused_equals_unfused(handle, monkeypatch, direction, config):
    """Fused and unfused give the same output with either kernel (the GPU one on PoCL), built
    with configs of test_implicit_gemm's sweep (whose programs it shares)."""
    monkeypatch.setattr(plan, "MIN_SPLIT_DEPTH", SPLIT_DEPTH)
    monkeypatch.setattr(configs, "default", lambda problem, device: configs.complete(config))
    rng = np.random.default_rng(5)
    flags = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
    for problem in PROBLEMS:
        problem = problem.with_direction(direction).with_epilogue(epilogue_of(direction))
        values = {"alpha": -1.5, "beta": 0.5}
        if direction is Direction.FORWARD:
            scale, bias = (cl.Buffer(handle.context, flags, hostbuf=rng.uniform(
                -1, 1, problem.k).astype(np.float32)) for _ in range(2))
            values.update(z_scale=0.75, activation=("leaky_relu", 0.1), scale=scale, bias=bias)
        fused, unfused = fused_and_unfused(handle, problem, random_tensors(problem, 3), values)
        assert np.abs(fused - unfused).max() <= 1e-6 * np.abs(unfused).max()


@pytest.mark.parametrize("config", [OTHER_CONFIGS[0], OTHER_CONFIGS[2]], ids=["gpu", "cpu"])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_a_split_forward_stores_every_stage_in_its_sum(handle, monkeypatch, layout, config):
    """Forward split 4 ways (forced, as a GPU splits a small output): the sum stores scale and
    bias of each element's own channel, the residual, the activation and the blend, channels-first
    and channels-last, as the unfused pass does."""
    split_forward_anywhere(monkeypatch, least=6)
    monkeypatch.setattr(configs, "default", lambda problem, device: configs.complete(config))
    rng = np.random.default_rng(6)
    flags = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
    problem = Problem.conv2d((2, 6, 9, 11), (8, 3, 3, 3), stride=(2, 1), padding=((1, 0), (2, 1)),
                             dilation=(1, 2), groups=2, layout=layout).with_epilogue(ALL)
    assert plan.splits(problem, handle.device) == 4
    scale, bias = (cl.Buffer(handle.context, flags, hostbuf=rng.uniform(
        -1, 1, problem.k).astype(np.float32)) for _ in range(2))
    values = {"alpha": -1.5, "beta": 0.5, "z_scale": 0.75, "activation": ("leaky_relu", 0.1),
              "scale": scale, "bias": bias}
    fused, unfused = fused_and_unfused(handle, problem, random_tensors(problem, 4), values)
    assert np.abs(fused - unfused).max() <= 1e-6 * np.abs(unfused).max()
