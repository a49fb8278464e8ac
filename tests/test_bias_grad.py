"""Backward-bias: a deterministic tree reduction, accurate on large N*H*W, its workspace exact,
alpha and beta, bad input refused before OpenCL."""
import convsolve
import numpy as np
import pyopencl as cl
import pytest
from convsolve import ValidationError, reference
from convsolve.bias_grad import BLOCK, backward_bias, backward_bias_workspace, passes


def _buffer(handle, array):
    flags = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
    return cl.Buffer(handle.context, flags, hostbuf=np.ascontiguousarray(array))


def _db(handle, dy, alpha=1.0, beta=0.0, prior=None, scratch=None):
    db = _buffer(handle, np.zeros(dy.shape[1], np.float32) if prior is None else prior)
    backward_bias(handle, dy.shape, dy=_buffer(handle, dy), db=db, alpha=alpha, beta=beta,
                  scratch=scratch)
    out = np.empty(dy.shape[1], np.float32)
    cl.enqueue_copy(handle.queue, out, db)
    return out


def test_passes_and_workspace():
    """Each pass sums blocks of BLOCK; the workspace holds two consecutive passes' partials."""
    assert passes((8, 64, 56, 56)) == [(3136, 8, 49), (392, 1, 7), (7, 1, 1)]
    assert backward_bias_workspace((8, 64, 56, 56)) == 4 * 64 * (392 + 7)
    assert passes((1, 3, 4, 4)) == [(16, 1, 1)] and backward_bias_workspace((1, 3, 4, 4)) == 0
    assert backward_bias_workspace((3, 2, 1, BLOCK + 6)) == 4 * 2 * 6


def test_accurate_and_deterministic_on_a_large_batch(handle):
    """On 2**20 elements per channel of mean 1 the tree sum stays within 1e-7 of float64, a
    hundred times closer than one float32 accumulator gets, and two runs agree bitwise."""
    dy = np.random.default_rng(0).uniform(0, 2, (64, 3, 128, 128)).astype(np.float32)
    exact = dy.astype(np.float64).sum(axis=(0, 2, 3))
    sequential = np.cumsum(dy.transpose(1, 0, 2, 3).reshape(3, -1), axis=1,
                           dtype=np.float32)[:, -1]
    first = _db(handle, dy)
    assert reference.relative_error(first, exact) < 1e-7
    assert reference.relative_error(sequential, exact) > 100 * reference.relative_error(
        first, exact)
    assert np.array_equal(first, _db(handle, dy))


def test_alpha_beta_and_unread_operands(handle):
    """db = alpha * sum + beta * db; alpha = 0 leaves a NaN dy unread, beta = 0 a NaN db."""
    rng = np.random.default_rng(1)
    dy = rng.standard_normal((3, 5, 7, 9)).astype(np.float32)
    prior = rng.standard_normal(5).astype(np.float32)
    expected = reference.backward_bias(dy, -0.5, 2.0, prior)
    assert reference.relative_error(_db(handle, dy, -0.5, 2.0, prior), expected) < 1e-6
    assert np.array_equal(_db(handle, np.full_like(dy, np.nan), 0.0, 2.0, prior), 2 * prior)
    assert not np.isnan(_db(handle, dy, 1.0, 0.0, np.full(5, np.nan, np.float32))).any()
    nan_dy = dy.copy()
    nan_dy[1, 2, 3, 4] = np.nan
    assert np.isnan(_db(handle, nan_dy))[2] and np.isfinite(np.delete(_db(handle, nan_dy), 2)).all()


def test_workspace_and_bad_input_are_refused(handle):
    """A scratch buffer smaller than the workspace, a non-finite alpha, dy as db, and a dy of
    the wrong size are ValidationErrors naming the field."""
    dy = np.ones((4, 2, 9, 9), np.float32)
    small = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, 4)
    with pytest.raises(ValidationError, match="invalid scratch=4"):
        _db(handle, dy, scratch=small)
    with pytest.raises(ValidationError, match="invalid alpha=inf"):
        _db(handle, dy, alpha=np.inf)
    buffer = _buffer(handle, dy)
    with pytest.raises(ValidationError, match="invalid db="):
        backward_bias(handle, dy.shape, dy=buffer, db=buffer)
    with pytest.raises(ValidationError, match="invalid dy buffer size"):
        backward_bias(handle, (5, 2, 9, 9), dy=buffer, db=_buffer(handle, np.zeros(2, np.float32)))


def test_numpy_api(handle):
    """conv2d_backward_bias sums dy over images and pixels, blends db, handles a zero batch."""
    dy = np.random.default_rng(2).standard_normal((2, 4, 3, 5)).astype(np.float32)
    prior = np.arange(4, dtype=np.float32)
    got = convsolve.conv2d_backward_bias(dy, 2.0, 0.5, prior, handle=handle)
    assert reference.relative_error(got, reference.backward_bias(dy, 2.0, 0.5, prior)) < 1e-6
    assert np.array_equal(convsolve.conv2d_backward_bias(dy[:0], beta=0.5, db=prior), prior / 2)
    with pytest.raises(ValidationError, match="invalid db=None"):
        convsolve.conv2d_backward_bias(dy, beta=1.0)
    with pytest.raises(ValidationError, match="invalid dy.dtype='float64'"):
        convsolve.conv2d_backward_bias(dy.astype(np.float64))
