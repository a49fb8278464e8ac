"""The numpy API and the reference: conv2d and its gradients, named solvers, bad arrays, zero batch."""
import copy
import math
import sys
import threading
import tracemalloc
import types

import convsolve
import numpy as np
import pyopencl as cl
import pytest
from convsolve import Problem, SolverError, ValidationError, reference
from convsolve.db.find_db import FindDb
from convsolve.testing import device_buffers, fake_device, random_tensors

RNG = np.random.default_rng(7)
X = RNG.standard_normal((2, 4, 7, 6)).astype(np.float32)
W = RNG.standard_normal((6, 2, 3, 2)).astype(np.float32)
KW = {"stride": (2, 1), "padding": ((1, 0), (0, 1)), "dilation": (1, 2), "groups": 2}


def test_conv2d_and_gradients_match_reference(handle):
    """conv2d, conv2d_backward_data and conv2d_backward_weights agree with the reference."""
    problem = Problem.conv2d(X.shape, W.shape, **KW)
    y = convsolve.conv2d(X, W, **KW, handle=handle)
    assert reference.relative_error(y, reference.forward(problem, X, W)) < 1e-5
    dy = RNG.standard_normal(y.shape).astype(np.float32)
    dx = convsolve.conv2d_backward_data(dy, W, X.shape, **KW, handle=handle)
    assert reference.relative_error(dx, reference.backward_data(problem, dy, W)) < 1e-5
    dw = convsolve.conv2d_backward_weights(dy, X, W.shape, **KW, handle=handle,
                                           solver="direct.NaiveBwdWeights")
    assert reference.relative_error(dw, reference.backward_weights(problem, X, dy)) < 1e-5


def test_reference_gradients_are_adjoints():
    """<conv(x, w), dy> = <x, bwd_data(dy, w)> = <w, bwd_weights(x, dy)>."""
    problem = Problem.conv2d(X.shape, W.shape, **KW)
    dy = RNG.standard_normal(problem.y.shape)
    lhs = np.vdot(reference.forward(problem, X, W), dy)
    assert np.isclose(lhs, np.vdot(X, reference.backward_data(problem, dy, W)))
    assert np.isclose(lhs, np.vdot(W, reference.backward_weights(problem, X, dy)))


def test_reference_matches_a_direct_sum():
    """The reference equals the convolution written as a plain loop on a tiny case."""
    x = RNG.standard_normal((1, 2, 4, 5))
    w = RNG.standard_normal((2, 2, 2, 3))
    problem = Problem.conv2d(x.shape, w.shape, stride=(1, 2), padding=((1, 0), (0, 1)))
    xp = np.pad(x, ((0, 0), (0, 0), (1, 0), (0, 1)))
    y = np.zeros(problem.y.shape)
    for k in range(2):
        for oh in range(problem.out_h):
            for ow in range(problem.out_w):
                y[0, k, oh, ow] = np.sum(xp[0, :, oh:oh + 2, 2 * ow:2 * ow + 3] * w[k])
    assert np.allclose(reference.forward(problem, x, w), y)


def test_bad_arrays_are_refused_before_opencl():
    """Wrong dtypes and gradient shapes raise ValidationError naming the array."""
    with pytest.raises(ValidationError, match="x.dtype"):
        convsolve.conv2d(X.astype(np.float64), W, groups=2)
    with pytest.raises(ValidationError, match="dy.shape"):
        convsolve.conv2d_backward_data(np.zeros((1, 1, 1, 1), np.float32), W, X.shape, groups=2)
    with pytest.raises(ValidationError, match="groups"):
        convsolve.conv2d(X, W, groups=3)


def test_named_solver_must_fit(handle):
    """Naming a solver of another direction is refused with the reason."""
    with pytest.raises(SolverError, match="does not serve FORWARD"):
        convsolve.conv2d(X, W, **KW, solver="direct.NaiveBwdData", handle=handle)


def test_zero_batch_returns_empty_and_zero_gradients():
    """Zero-batch problems give empty outputs and zero weight gradients without a device."""
    x = np.zeros((0, 4, 7, 6), np.float32)
    assert convsolve.conv2d(x, W, groups=2).shape == (0, 6, 5, 5)
    dy = np.zeros((0, 6, 5, 5), np.float32)
    assert convsolve.conv2d_backward_data(dy, W, x.shape, groups=2).shape == x.shape
    dw = convsolve.conv2d_backward_weights(dy, x, W.shape, groups=2)
    assert dw.shape == W.shape and not dw.any()


def test_applicable_solvers():
    """applicable_solvers names the enabled solvers that serve the problem."""
    problem = Problem.conv2d(X.shape, W.shape, groups=2, direction="wrw")
    assert convsolve.applicable_solvers(problem) == ["direct.NaiveBwdWeights"]


def test_threads_sharing_a_handle_get_their_own_results(handle):
    """Two threads calling conv2d on one handle each get their own output, never the other's."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)   # switch threads often, to widen any race
    try:
        inputs = [RNG.standard_normal((1, 3, 6, 6)).astype(np.float32) for _ in range(2)]
        w = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
        problem = Problem.conv2d(inputs[0].shape, w.shape, padding=1)
        expected = [reference.forward(problem, x, w) for x in inputs]
        wrong = [0, 0]

        def work(i):
            for _ in range(200):
                y = convsolve.conv2d(inputs[i], w, padding=1, solver="direct.NaiveFwd",
                                     handle=handle)
                wrong[i] += reference.relative_error(y, expected[i]) > 1e-5
        threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert wrong == [0, 0]


def test_tensor_over_the_device_largest_buffer_is_refused_before_opencl(handle):
    """A tensor larger than the device's largest buffer is a ValidationError naming the tensor,
    its bytes and the limit, before any buffer is made (it was pyopencl's INVALID_BUFFER_SIZE)."""
    limit = handle.device.max_mem_alloc_size
    one = np.ones((1, 1, 1, 1), np.float32)
    side = math.isqrt(limit // 4) + 1          # a side x side output just over the limit
    if side * side > 2 ** 31 - 1:
        pytest.skip("every tensor a Problem admits fits this device's largest buffer")
    cases = [{"padding": ((side - 1, 0), (side - 1, 0))}]
    if 40001 ** 2 * 4 > limit:
        cases.append({"padding": 20000})     # the tester's case: 40001 x 40001 floats
    for kwargs in cases:
        with pytest.raises(ValidationError) as info:
            convsolve.conv2d(one, one, **kwargs, handle=handle)
        assert info.value.field == "y bytes" and info.value.value > limit
        assert f"{limit} bytes" in str(info.value) and "max_mem_alloc_size" in str(info.value)
    with pytest.raises(ValidationError, match="max_mem_alloc_size") as info:   # a gradient's dx
        convsolve.conv2d_backward_data(one, one, (1, 1, side, side), stride=side, handle=handle)
    assert info.value.field == "x bytes"


def test_stride_past_int32_is_refused_by_every_entry_point(handle):
    """stride=2**31 (it was OverflowError, or std::bad_cast from a kernel argument) is refused as
    a ValidationError naming the stride, whichever API and solver are used."""
    one = np.ones((1, 1, 1, 1), np.float32)
    calls = [lambda: convsolve.conv2d(one, one, stride=2 ** 31, solver="direct.NaiveFwd",
                                      handle=handle),
             lambda: convsolve.conv2d(one, one, stride=2 ** 31, handle=handle),
             lambda: convsolve.conv2d_backward_weights(one, one, (1, 1, 1, 1), stride=(1, 2 ** 31),
                                                       solver="direct.NaiveBwdWeights",
                                                       handle=handle)]
    for call in calls:
        with pytest.raises(ValidationError) as info:
            call()
        assert info.value.field == "stride"


def _tiny(handle, max_mem_alloc_size=16, global_mem_size=1 << 30):
    """The session's handle, its device's limits made tiny."""
    tiny = copy.copy(handle)
    tiny.device = types.SimpleNamespace(name="a tiny device", platform=types.SimpleNamespace(
        name="Fake"), max_mem_alloc_size=max_mem_alloc_size, global_mem_size=global_mem_size)
    return tiny


def test_backward_bias_over_the_device_largest_buffer_is_refused_before_opencl(handle):
    """A dy larger than the device's largest buffer is a ValidationError naming dy, as the
    convolutions give (it was pyopencl's INVALID_BUFFER_SIZE); dy a broadcast view, not copied."""
    limit = handle.device.max_mem_alloc_size
    side = math.isqrt(limit // 4) + 1
    if side * side >= 2 ** 30:
        pytest.skip("every dy backward-bias admits (N * H * W < 2**30) fits this device's "
                    "largest buffer")
    dy = np.broadcast_to(np.float32(1), (1, 1, side, side))
    with pytest.raises(ValidationError, match="max_mem_alloc_size") as info:
        convsolve.conv2d_backward_bias(dy, handle=handle)
    assert info.value.field == "dy bytes" and f"{limit} bytes" in str(info.value)


def _huge(shape):
    """A float32 view of ``shape`` that takes no memory: one element, broadcast."""
    return np.broadcast_to(np.float32(1), shape)


def _calls(big, handle):
    """(call, the field refused when ``big`` is too large for the device) for each numpy entry
    point given the view ``big`` (1, 1, H, W) as its input (and as z, the residual)."""
    one, shape = np.ones((1, 1, 1, 1), np.float32), big.shape
    pad = ((shape[2] - 1, 0), (shape[3] - 1, 0))   # a 1x1 output grown to big's shape
    return [(lambda: convsolve.conv2d(big, one, handle=handle), "x"),
            (lambda: convsolve.conv2d(one, one, z=big, padding=pad, handle=handle), "y"),
            (lambda: convsolve.conv2d_backward_data(big, one, shape, handle=handle), "x"),
            (lambda: convsolve.conv2d_backward_weights(big, big, (1, 1, 1, 1), handle=handle),
             "x"),
            (lambda: convsolve.conv2d_backward_bias(big, handle=handle), "dy"),
            (lambda: convsolve.conv_transpose2d(big, one, handle=handle), "x")]


def test_huge_views_are_refused_before_any_copy(handle):
    """Shapes and sizes are checked before an input is copied: a 4 PiB broadcast view is a
    ValidationError (it was numpy's MemoryError), and a 64 MiB one on a device whose largest
    buffer is 1 MiB is refused while host memory grows by under 1 MiB (it was copied first)."""
    for call, _ in _calls(_huge((1, 1, 2 ** 25, 2 ** 25)), handle):
        with pytest.raises(ValidationError, match="at most 2\\*\\*31 - 1"):
            call()
    tiny = _tiny(handle, max_mem_alloc_size=1 << 20)
    tracemalloc.start()
    try:
        for call, field in _calls(_huge((1, 1, 4096, 4096)), tiny):
            tracemalloc.reset_peak()
            with pytest.raises(ValidationError, match="max_mem_alloc_size") as info:
                call()
            assert info.value.field == f"{field} bytes"
            assert tracemalloc.get_traced_memory()[1] < 1 << 20, info.value
    finally:
        tracemalloc.stop()


def test_find_checks_the_device_before_anything_else(handle):
    """find refuses tensors its device cannot hold before it touches the device."""
    tiny = copy.copy(handle)   # the session's handle, its device's limits made tiny
    tiny.device = fake_device("avx512", name="a tiny device", platform="Fake",
                              max_mem_alloc_size=16, global_mem_size=1 << 30)
    problem = Problem.conv2d((1, 1, 3, 3), (1, 1, 1, 1))
    buffers = {name: cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, 64) for name in "xwy"}
    with pytest.raises(ValidationError, match="x bytes=36: .* 16 bytes .*on Fake: a tiny device"):
        convsolve.find(tiny, problem, **buffers)


def test_wrong_arguments_are_validation_errors(handle):
    """A ragged array, a solver that is not a name and a problem that is not a Problem are
    ValidationErrors, not numpy's or Python's errors."""
    with pytest.raises(ValidationError) as info:
        convsolve.conv2d([[1.0], [1.0, 2.0]], W)
    assert info.value.field == "x"
    with pytest.raises(ValidationError) as info:
        convsolve.conv2d(X, W, **KW, solver=["direct.NaiveFwd"], handle=handle)
    assert info.value.field == "solver"
    with pytest.raises(ValidationError) as info:
        convsolve.find(handle, Problem.conv2d(X.shape, W.shape, **KW).key(), x=None, w=None,
                       y=None)
    assert info.value.field == "problem"


def test_run_refuses_a_workspace_beyond_the_largest_buffer(handle, monkeypatch):
    """A named solver whose workspace cannot be one buffer on the device is refused by name."""
    import cs_fake
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,cs_fake")
    monkeypatch.setattr(cs_fake.Good, "workspace_bytes", handle.device.max_mem_alloc_size + 4)
    problem = Problem.conv2d((1, 1, 3, 3), (1, 1, 1, 1))
    buffers = {name: cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, 64) for name in "xwy"}
    with pytest.raises(ValidationError, match="'fake.Good' needs more than the largest buffer"):
        convsolve.run(handle, problem, "fake.Good", **buffers)


def test_find_db_hits_respect_the_given_scratch(handle, monkeypatch):
    """A find-db hit whose solver needs more workspace than the caller's scratch is not offered."""
    import cs_fake
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_fake")
    monkeypatch.setenv("CONVSOLVE_DISABLE_SOLVERS", "fake.Hungry,fake.RunFails,fake.BadBuild")
    monkeypatch.setattr(cs_fake.Good, "workspace_bytes", 1024)
    problem = Problem.conv2d((1, 1, 3, 3), (1, 1, 1, 1))
    buffers = device_buffers(handle, random_tensors(problem))
    assert {s.solver for s in convsolve.find(handle, problem, **buffers)} == {"fake.Good",
                                                                             "fake.NoWti"}
    small = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, 512)
    hit = convsolve.find(handle, problem, **buffers, scratch=small)
    assert [s.solver for s in hit] == ["fake.NoWti"] and hit[0].source == "find-db"
    for mode in ("NORMAL", "FAST"):   # nor by a benchmark or the WTI fallback
        assert "fake.Good" not in {s.solver for s in convsolve.find(
            handle, problem, **buffers, scratch=small, mode=mode)}
    kept = {r.solver for r in FindDb().lookup(handle.db_key, problem.key())}
    assert "fake.Good" in kept   # what it did not measure again stays recorded


def test_a_known_problem_finds_once_and_keeps_its_checks(handle, monkeypatch):
    """The numpy functions find on a problem's first call only, then run its plan; the shapes'
    cache never admits what the checks refuse (True is not a stride, though True == 1)."""
    calls = []
    real = convsolve.api.find
    monkeypatch.setattr(convsolve.api, "find", lambda *a, **k: calls.append(1) or real(*a, **k))
    problem = Problem.conv2d((1, 2, 5, 5), (3, 2, 3, 3), padding=1)
    host = random_tensors(problem)
    for _ in range(3):
        y = convsolve.conv2d(host["x"], host["w"], padding=1, handle=handle)
        assert np.allclose(y, reference.forward(problem, host["x"], host["w"]), atol=1e-5)
    assert calls == [1]
    with pytest.raises(ValidationError, match="stride"):
        convsolve.conv2d(host["x"], host["w"], stride=True, padding=1, handle=handle)
    with pytest.raises(ValidationError, match="padding"):
        convsolve.conv2d(host["x"], host["w"], padding=(True, 1), handle=handle)
    with pytest.raises(ValidationError, match="alpha"):
        convsolve.conv2d(host["x"], host["w"], padding=1, alpha=True, handle=handle)


# {{{ every spatial rank and layout

def _memory(problem, name, array):
    """``array`` (logical order) in the memory order of ``problem``'s tensor ``name``."""
    return reference.in_memory(getattr(problem, name), array).astype(np.float32)


@pytest.mark.parametrize("rank, layout", [(1, "NWC"), (3, None),
                                          (3, {"x": "NDHWC", "y": "NDHWC"}), (2, "NHWC")])
def test_every_rank_and_layout_matches_the_reference(handle, rank, layout):
    """conv1d/conv2d/conv3d and their gradients, through find, agree with the reference with
    arrays in the layout's memory order ((N, W, C) for NWC), strides, padding, dilation and
    groups per spatial dim."""
    shapes = {1: ((2, 4, 9), (6, 2, 3)), 2: ((2, 4, 7, 6), (6, 2, 3, 2)),
              3: ((1, 4, 5, 4, 6), (6, 2, 3, 1, 2))}[rank]
    kw = {"stride": (2,) * rank, "padding": ((1, 0),) * rank, "dilation": (1,) * (rank - 1) + (2,),
          "groups": 2, "layout": layout}
    fwd, bwd, wrw = {1: (convsolve.conv1d, convsolve.conv1d_backward_data,
                         convsolve.conv1d_backward_weights),
                     2: (convsolve.conv2d, convsolve.conv2d_backward_data,
                         convsolve.conv2d_backward_weights),
                     3: (convsolve.conv3d, convsolve.conv3d_backward_data,
                         convsolve.conv3d_backward_weights)}[rank]
    problem = Problem.convolution(*shapes, **kw)
    x, w, dy = (_memory(problem, name, RNG.standard_normal(getattr(problem, name).shape))
                for name in "xwy")
    y = fwd(x, w, **kw, handle=handle)
    assert y.shape == problem.y.memory_shape
    assert reference.relative_error(y, reference.forward(problem, x, w)) < 1e-5
    dx = bwd(dy, w, x.shape, **kw, handle=handle)
    assert reference.relative_error(dx, reference.backward_data(problem, dy, w)) < 1e-5
    dw = wrw(dy, x, w.shape, **kw, handle=handle)
    assert reference.relative_error(dw, reference.backward_weights(problem, x, dy)) < 1e-5


@pytest.mark.parametrize("rank", [1, 3])
def test_transposed_1d_and_3d_follow_pytorch(handle, rank):
    """conv_transpose1d/3d give PyTorch's output size, zeros in the output_padding no input
    reaches, and the backward-data of the convolution they transpose."""
    transpose = convsolve.conv_transpose1d if rank == 1 else convsolve.conv_transpose3d
    x = RNG.standard_normal((1, 4, *(3,) * rank)).astype(np.float32)
    w = RNG.standard_normal((4, 1, *(2,) * rank)).astype(np.float32)
    out = transpose(x, w, output_padding=2, groups=2, dilation=3, handle=handle)
    assert out.shape == (1, 2, *(8,) * rank)   # (3-1)*1 + 3*(2-1) + 2 + 1
    problem = Problem.conv_transpose(x.shape, w.shape, groups=2, dilation=3)
    inner = (slice(None), slice(None), *(slice(0, 6),) * rank)
    assert reference.relative_error(out[inner], reference.backward_data(problem, x, w)) < 1e-5
    rest = out.copy()
    rest[inner] = 0
    assert not rest.any()


def test_other_ranks_and_layouts_are_found_once_under_their_own_keys(handle):
    """find records a 3-D or NHWC problem under its own key (the 2-D NCHW key of the same sizes
    untouched), and a process that has not seen it answers from that record (DB hit)."""
    problem = Problem.convolution((1, 2, 3, 4, 5), (3, 2, 1, 2, 3), layout="NDHWC")
    nhwc = Problem.conv2d((1, 2, 4, 5), (3, 2, 2, 3), layout={"x": "NHWC"})
    for p in (problem, nhwc):
        found = convsolve.find(handle, p, **device_buffers(handle, random_tensors(p)))
        assert found[0].source == "benchmark"
        assert {r.solver for r in FindDb().lookup(handle.db_key, p.key())} == {"direct.NaiveFwd"}
        handle.forget_rankings()
        again = convsolve.find(handle, p, **device_buffers(handle, random_tensors(p)), mode="FAST")
        assert again[0].source == "find-db"
    assert not FindDb().lookup(handle.db_key, Problem.conv2d((1, 2, 4, 5), (3, 2, 2, 3)).key())


def test_channels_last_and_other_ranks_are_refused_clearly(monkeypatch):
    """A bias of the wrong length on an NHWC problem (as on NCHW), an array whose shape does
    not fit its layout and a 3-D problem no installed solver serves each raise one error naming
    what is wrong."""
    with pytest.raises(ValidationError) as info:
        convsolve.conv2d(X.transpose(0, 2, 3, 1).copy(), W, groups=2, layout="NHWC",
                         bias=np.zeros(W.shape[0] + 1, np.float32))
    assert info.value.field == "bias.shape"
    with pytest.raises(ValidationError) as info:
        convsolve.conv3d(X, W, groups=2)
    assert info.value.field == "x_shape"
    with pytest.raises(ValidationError) as info:
        convsolve.conv1d(X[:, :, 0], W[:, :, 0], groups=2, layout="NHWC")
    assert info.value.field == "layout"
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_fake")
    with pytest.raises(convsolve.FindError, match="does not serve spatial rank 3"):
        convsolve.conv3d(np.zeros((1, 2, 3, 3, 3), np.float32),
                         np.zeros((2, 2, 1, 1, 1), np.float32))

# }}}
