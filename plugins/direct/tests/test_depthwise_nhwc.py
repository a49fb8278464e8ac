"""direct.DepthwiseNhwc: the contract in every rank and layout it claims, a sweep over
multipliers, strides, dilations, asymmetric padding, filter sizes and channel counts that no
vector width divides in all three directions, its workspace, the transposed weights (packed
once with constant weights), determinism over batch chunkings, what it refuses, its configs,
and find and the numpy API reaching it."""
import convsolve
import numpy as np
import pyopencl as cl
import pytest
from convsolve import Buffers, Direction, Problem, reference, registry
from convsolve.testing import (
    check_solver,
    device_buffers,
    expected_output,
    guarded,
    random_tensors,
    read_output,
)
from convsolve_direct import plan
from direct_helpers import assert_matches_reference, configs_to_check, equal_bits, run_config

NAME = "direct.DepthwiseNhwc"
# (x_shape, w_shape, stride, padding, dilation, groups) in logical order, groups = C,
# K = C * multiplier; run with every tensor NHWC
SHAPES = [
    ((2, 3, 17, 19), (3, 1, 3, 3), 1, 1, 1, 3),                    # multiplier 1, odd sizes
    ((1, 5, 13, 37), (10, 1, 3, 3), 2, 1, 1, 5),                   # multiplier 2, stride 2
    ((1, 4, 16, 21), (8, 1, 5, 5), 3, ((2, 0), (1, 2)), 1, 4),     # 5x5, stride 3, asymmetric
    ((2, 12, 15, 14), (12, 1, 3, 2), (2, 1), 3, (3, 2), 12),       # stride (2, 1), dilation
    ((3, 20, 7, 9), (20, 1, 1, 1), 1, 0, 1, 20),                   # 1x1, C = 16 + 4
    ((1, 9, 6, 11), (18, 1, 2, 3), (1, 3), ((0, 1), (2, 0)), 2, 9),  # windows in the padding
]
#: Besides the default (VW 8 or 4 on AVX2, 16 on AVX-512): 16 channels with 8 pixels (every
#: channel count here a tail), and 4 channels, one pixel per item; two builds in all.
WISHES = [{"VW": 16, "PX": 8, "WG": 1}, {"VW": 4, "PX": 1, "WG": 16}]


def nhwc(shape, direction, layout="NHWC"):
    return Problem.conv2d(*shape, direction=direction, layout=layout)


def test_check_solver(handle):
    """The contract on every problem of each rank and layout it claims (1-D, 2-D and 3-D
    depthwise problems, weights channels-last and channels-first) with random configs."""
    assert check_solver(registry().get(NAME), handle, configs=6) == 18


@pytest.mark.parametrize("direction", list(Direction), ids=lambda d: d.value)
@pytest.mark.parametrize("shape", SHAPES, ids=[str(i) for i in range(len(SHAPES))])
def test_sweep(handle, shape, direction):
    """Each direction agrees with the reference with each config chosen."""
    assert_matches_reference(handle, NAME, nhwc(shape, direction), WISHES)


@pytest.mark.parametrize("direction", list(Direction), ids=lambda d: d.value)
@pytest.mark.parametrize("problem", [
    Problem.conv1d((2, 6, 23), (12, 1, 4), 3, ((2, 1),), 2, 6, layout="NWC"),
    Problem.conv3d((1, 5, 5, 6, 7), (5, 1, 3, 1, 2), (2, 1, 3), ((1, 0), (0, 0), (1, 1)),
                   (1, 1, 2), 5, layout="NDHWC")], ids=["1d", "3d"])
def test_other_ranks(handle, problem, direction):
    """1-D (depth and height 1) and 3-D problems agree with the reference."""
    assert_matches_reference(handle, NAME, problem.with_direction(direction), WISHES[:1])


@pytest.mark.parametrize("direction", list(Direction), ids=lambda d: d.value)
def test_weights_layout_is_one_memory_order(handle, direction):
    """Channels-first and channels-last weights are the same memory order at one channel per
    group: the same host arrays give bitwise-equal results (dW's arrays differ in shape only)."""
    solver = registry().get(NAME)
    shape = SHAPES[1]
    last = nhwc(shape, direction)
    first = nhwc(shape, direction, {"x": "NHWC", "w": "NCHW", "y": "NHWC"})
    host = random_tensors(last, 3)
    config = solver.default_config(last, handle)
    assert equal_bits(run_config(handle, solver, last, config, host).ravel(),
                      run_config(handle, solver, first, config, host).ravel())


def test_workspace_is_exact():
    """Forward and backward-data take the transposed weights, 4 * K * taps bytes; backward-weights
    the partial dWs of one chunk: ceil(20 / 4) = 5 tiles of 4 rows per image (9 work units a
    tile: 8 channels x 9 taps), 4 * |dW| * 5 * 2 bytes."""
    solver = registry().get(NAME)
    problem = Problem.conv2d((2, 8, 20, 9), (8, 1, 3, 3), padding=1, groups=8, layout="NHWC")
    assert solver.workspace(problem) == 4 * 8 * 9
    assert solver.workspace(problem.with_direction("bwd")) == 4 * 8 * 9
    assert solver.workspace(problem.with_direction("wrw")) == 4 * 72 * 5 * 2


#: Multiplier 2 with channels no vector width divides (C = 5, 9), non-square filters
PACKED = [nhwc(SHAPES[i], direction) for i in (1, 5) for direction in ("fwd", "bwd")]


@pytest.mark.parametrize("problem", PACKED, ids=[p.key() for p in PACKED])
def test_packed_weights_are_taps_by_k(handle, problem):
    """dwl_weights writes w (K x taps) transposed, taps x K, exactly |w| bytes of it: a wrong
    order that the convolution read back consistently would still fail here."""
    solver = registry().get(NAME)
    packing = solver.build_packing(problem, handle, solver.default_config(problem, handle))
    assert packing.nbytes == solver.workspace(problem) == problem.w.nbytes
    host = random_tensors(problem, seed=4)
    w = guarded.allocate(handle, host["w"].nbytes, host["w"])
    packed = guarded.allocate(handle, packing.nbytes)
    cl.wait_for_events(packing.pack(w, packed))
    out = np.empty(problem.w.size, np.float32)
    cl.enqueue_copy(handle.queue, out, packed)
    assert equal_bits(out, host["w"].reshape(problem.k, -1).T.ravel())
    assert not guarded.changed(handle, packed, packing.nbytes,
                               packing.nbytes + guarded.guard_bytes(handle)).size


@pytest.mark.parametrize("problem", PACKED, ids=[p.key() for p in PACKED])
def test_packed_path_matches_the_reference(handle, problem):
    """With each config: pack, then the invoker from the packed weights alone (w overwritten
    with NaN) matches the reference and the per-call invoker bit for bit, writing nothing past
    the packed buffer or the workspace."""
    solver = registry().get(NAME)
    host, out = random_tensors(problem, seed=3), problem.direction.output
    expected = reference.compute(problem, **host)
    workspace = solver.workspace(problem)
    for config in configs_to_check(handle, solver, problem, WISHES):
        packing = solver.build_packing(problem, handle, config)
        buffers = guarded.tensors(handle, host, blank=(out,))
        packed = guarded.allocate(handle, packing.nbytes)
        scratch = guarded.allocate(handle, workspace)
        cl.wait_for_events(packing.pack(buffers["w"], packed))
        cl.enqueue_fill_buffer(handle.queue, buffers["w"], np.float32(np.nan), 0,
                               host["w"].nbytes)
        cl.wait_for_events(packing.invoker(Buffers(**buffers), scratch, packed))
        result = read_output(handle, problem, buffers)
        assert reference.relative_error(result, expected) < 1e-5, config
        assert equal_bits(result, run_config(handle, solver, problem, config, host))
        assert not guarded.changed(handle, scratch, workspace,
                                   workspace + guarded.guard_bytes(handle)).size


def test_backward_weights_packs_nothing(handle):
    """Backward-weights writes the weights: build_packing answers None."""
    solver = registry().get(NAME)
    problem = nhwc(SHAPES[1], "wrw")
    assert solver.build_packing(problem, handle, solver.default_config(problem, handle)) is None


def test_constant_weights_pack_once(handle):
    """The numpy API with constant weights transposes them on the first of two calls only."""
    problem = nhwc(SHAPES[1], "fwd")
    host = random_tensors(problem, seed=6)
    packs = handle.weights_cache.packs
    for _ in range(2):
        y = convsolve.conv2d(host["x"], host["w"], stride=2, padding=1, groups=5,
                             layout="NHWC", solver=NAME, handle=handle, constant_weights=True)
        assert np.allclose(y, expected_output(problem, host), rtol=1e-5, atol=1e-5)
    assert handle.weights_cache.packs == packs + 1


def test_backward_weights_bitwise_equal_over_chunkings(handle, monkeypatch):
    """Backward-weights gives bitwise-equal results run after run and for a batch cut into
    chunks of one image (a workspace budget of one image's partials) or taken whole."""
    solver = registry().get(NAME)
    problem = nhwc(SHAPES[3], "wrw")
    host = random_tensors(problem, 2)
    config = solver.default_config(problem, handle)
    whole = run_config(handle, solver, problem, config, host)
    assert equal_bits(whole, run_config(handle, solver, problem, config, host))
    monkeypatch.setattr(plan, "BUDGET_BYTES", 4 * problem.w.size * 2)
    assert solver._partials(problem).chunk == 1 < problem.n
    assert equal_bits(whole, run_config(handle, solver, problem, config, host))


def test_refusals():
    """Channels-first x or y and groups other than C are refused; every tensor NHWC and
    x and y NHWC beside NCHW weights are served."""
    solver = registry().get(NAME)
    shape = SHAPES[0]
    assert solver.is_applicable(nhwc(shape, "fwd"))
    assert solver.is_applicable(nhwc(shape, "fwd", {"x": "NHWC", "w": "NCHW", "y": "NHWC"}))
    assert not solver.is_applicable(Problem.conv2d(*shape))
    assert not solver.is_applicable(nhwc(shape, "fwd", {"x": "NHWC"}))
    assert not solver.is_applicable(nhwc(shape, "bwd", {"y": "NHWC"}))
    assert not solver.is_applicable(Problem.conv2d((1, 4, 8, 8), (4, 2, 3, 3), groups=2,
                                                   layout="NHWC"))


def test_defaults_per_device_class(fake_handle):
    """Wide vectors on CPUs, 4 on GPUs with 128-item groups; narrower where the channels are
    not a multiple; fewer pixels on narrow images; a group past the device's is refused."""
    solver = registry().get(NAME)
    problem = Problem.conv2d((8, 32, 112, 112), (32, 1, 3, 3), padding=1, groups=32,
                             layout="NHWC")
    for kind, wanted in (("avx512", {"VW": 16, "PX": 8, "WG": 2}),
                         ("avx2", {"VW": 16, "PX": 8, "WG": 2}),
                         ("gpu", {"VW": 4, "PX": 2, "WG": 128})):
        assert solver.default_config(problem, fake_handle(kind)) == wanted
    odd = Problem.conv2d((1, 24, 9, 3), (24, 1, 3, 3), groups=24, layout="NHWC")
    assert solver.default_config(odd, fake_handle("avx512")) == {"VW": 8, "PX": 1, "WG": 2}
    assert solver.default_config(odd.with_direction("bwd"), fake_handle("gpu"))["PX"] == 2
    small = fake_handle("gpu", max_work_group_size=64)
    assert solver.check_config(problem, small, {"VW": 4, "PX": 2, "WG": 128})
    assert solver.default_config(problem, small)["WG"] == 64


def test_find_and_the_numpy_api_reach_it(handle, monkeypatch):
    """Immediate mode's WTI fallback ranks it first for an NHWC depthwise problem, above
    direct.Depthwise's composite; find times both (verified); conv2d(..., layout="NHWC")
    through it matches the reference."""
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "direct")
    monkeypatch.setenv("CONVSOLVE_DISABLE_SOLVERS", "direct.Tiled")
    problem = nhwc(SHAPES[1], "fwd")
    fallback = convsolve.get_solutions(handle, problem)
    assert [s.source for s in fallback[:2]] == ["fallback"] * 2
    assert [s.solver for s in fallback[:2]] == [NAME, "direct.Depthwise/nchw"]
    host = random_tensors(problem)
    found = {s.solver for s in convsolve.find(handle, problem, **device_buffers(handle, host),
                                              mode="NORMAL", verify=True)}
    assert {NAME, "direct.Depthwise/nchw"} <= found
    y = convsolve.conv2d(host["x"], host["w"], stride=2, padding=1, groups=5, layout="NHWC",
                         solver=NAME, handle=handle)
    expected = expected_output(problem, host)
    assert y.shape == expected.shape
    assert np.allclose(y, expected, rtol=1e-5, atol=1e-5)
