"""Host arrays on a device that shares host memory: wrapped (zero-copy) where aligned, contiguous
float32 and allowed, else copied; the numpy API's output written in place, into out= or its own
aligned array, with the same results either way."""
import convsolve
import numpy as np
import pyopencl as cl
import pytest
from convsolve import ValidationError
from convsolve.device import tensors
from convsolve.device.tensors import WRAP_ALIGN, HostOutput, aligned_empty, host_buffer, wraps

RNG = np.random.default_rng(5)
X = RNG.standard_normal((2, 3, 9, 8)).astype(np.float32)
W = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)


@pytest.fixture
def unified(handle):
    """The session's handle, which must share host memory (PoCL) for these tests."""
    if not handle.device.host_unified_memory:
        pytest.skip(f"{handle.name} does not share host memory")
    return handle


def _aligned(array, offset=0):
    """A copy of ``array`` at an address ``offset`` bytes past a WRAP_ALIGN boundary."""
    raw = np.empty(array.size + 2 * WRAP_ALIGN // 4, np.float32)
    start = (-raw.ctypes.data % WRAP_ALIGN + offset) // 4
    copy = raw[start:start + array.size].reshape(array.shape)
    copy[...] = array
    return copy


def test_wraps_only_aligned_contiguous_float32_when_allowed(unified, monkeypatch):
    """wraps() takes a non-empty, C-contiguous, float32, aligned array on a unified-memory
    device, and nothing under CONVSOLVE_ZERO_COPY=0."""
    aligned = _aligned(X)
    assert aligned_empty((3, 5)).ctypes.data % WRAP_ALIGN == 0
    assert wraps(unified, aligned)
    assert not wraps(unified, _aligned(X, offset=4))
    assert not wraps(unified, aligned[:, :, ::2])
    assert not wraps(unified, aligned_empty((0, 3)))
    monkeypatch.setenv("CONVSOLVE_ZERO_COPY", "0")
    assert not wraps(unified, aligned)


def test_host_buffer_wraps_the_array_itself_or_copies_it(unified, monkeypatch):
    """A wrapped array's buffer is its memory (a change made after wrapping is what the device
    reads); a copied one's is not."""
    for zero_copy, sees_change in (("1", True), ("0", False)):
        monkeypatch.setenv("CONVSOLVE_ZERO_COPY", zero_copy)
        array = _aligned(X)
        buffer = host_buffer(unified, array)
        array[0, 0, 0, 0] = 42.0
        back = np.empty_like(array)
        cl.enqueue_copy(unified.queue, back, buffer)
        assert (back[0, 0, 0, 0] == 42.0) == sees_change
        assert np.array_equal(back.ravel()[1:], array.ravel()[1:])


def test_host_output_writes_in_place_without_reading_back(unified, monkeypatch):
    """conv2d's output, wrapped, is mapped rather than copied back (no enqueue_copy); copied
    (CONVSOLVE_ZERO_COPY=0) it is read back; both give the same result."""
    convsolve.conv2d(X, W, padding=1, handle=unified)   # the plan, made once
    copies = []
    original = tensors.cl.enqueue_copy
    monkeypatch.setattr(tensors.cl, "enqueue_copy", lambda *a, **k: copies.append(1) or
                        original(*a, **k))
    wrapped = convsolve.conv2d(_aligned(X), _aligned(W), padding=1, handle=unified)
    assert copies == [] and wrapped.ctypes.data % WRAP_ALIGN == 0
    monkeypatch.setenv("CONVSOLVE_ZERO_COPY", "0")
    copied = convsolve.conv2d(X, W, padding=1, handle=unified)
    assert copies and np.array_equal(wrapped, copied)


@pytest.mark.parametrize("zero_copy", ["1", "0"])
def test_out_is_written_and_returned(handle, monkeypatch, zero_copy):
    """out= is written in place and returned, aligned or not, contiguous or a view, and equals
    the result without out=; out=dw with beta=1 accumulates into it."""
    monkeypatch.setenv("CONVSOLVE_ZERO_COPY", zero_copy)
    expected = convsolve.conv2d(X, W, padding=1, handle=handle)
    for out in (aligned_empty(expected.shape), np.empty(expected.shape, np.float32),
                np.empty((*expected.shape[:3], 2 * expected.shape[3]), np.float32)[..., ::2]):
        got = convsolve.conv2d(X, W, padding=1, out=out, handle=handle)
        assert got is out and np.array_equal(out, expected)
    dw = convsolve.conv2d_backward_weights(expected, X, W.shape, padding=1, handle=handle)
    total = dw.copy()
    convsolve.conv2d_backward_weights(expected, X, W.shape, padding=1, beta=1.0, dw=total,
                                      out=total, handle=handle)
    assert np.allclose(total, 2 * dw, rtol=1e-6, atol=1e-6)


def test_out_of_the_other_functions(handle):
    """out= of the bias gradient and of the transposed convolution (its output padding zeroed
    here, the rest written by the solver) equals their results without it."""
    dy = convsolve.conv2d(X, W, padding=1, handle=handle)
    db = np.full(4, np.nan, np.float32)
    assert convsolve.conv2d_backward_bias(dy, out=db, handle=handle) is db
    assert np.array_equal(db, convsolve.conv2d_backward_bias(dy, handle=handle))
    kw = {"stride": 2, "padding": 1, "output_padding": 1, "handle": handle}
    expected = convsolve.conv_transpose2d(dy, W, **kw)
    out = np.full(expected.shape, np.nan, np.float32)
    assert convsolve.conv_transpose2d(dy, W, out=out, **kw) is out
    assert np.array_equal(out, expected)


def test_bad_out_is_refused_by_name(handle):
    """out= of another dtype or shape, read-only, or sharing an input's memory is refused."""
    shape = (2, 4, 9, 8)
    read_only = np.empty(shape, np.float32)
    read_only.flags.writeable = False
    x = X.copy()
    cases = [(np.empty(shape, np.float64), "out.dtype"), (np.empty((2, 4, 9, 7), np.float32),
             "out.shape"), (read_only, "out"), ([0.0], "out")]
    for out, field in cases:
        with pytest.raises(ValidationError) as info:
            convsolve.conv2d(x, W, padding=1, out=out, handle=handle)
        assert info.value.field == field
    with pytest.raises(ValidationError, match="an input's memory"):
        convsolve.conv2d_backward_data(x, np.ones((3, 3, 1, 1), np.float32), x.shape, out=x,
                                       handle=handle)


def test_host_output_copies_the_prior_unless_it_is_out(unified):
    """HostOutput starts from the prior contents: copied into out, or out itself."""
    prior = _aligned(X)
    fresh = HostOutput(unified, X.shape, None, prior)
    assert np.array_equal(fresh.read(), X) and fresh.array is not prior
    same = HostOutput(unified, X.shape, prior, prior)
    assert same.array is prior and same.wrapped
