"""The numpy API and the reference: conv2d and its gradients, named solvers, bad arrays, zero batch."""
import sys
import threading

import convsolve
import numpy as np
import pytest
from convsolve import Problem, SolverError, ValidationError, reference

RNG = np.random.default_rng(7)
X = RNG.standard_normal((2, 4, 7, 6)).astype(np.float32)
W = RNG.standard_normal((6, 2, 3, 2)).astype(np.float32)
KW = dict(stride=(2, 1), padding=((1, 0), (0, 1)), dilation=(1, 2), groups=2)


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
