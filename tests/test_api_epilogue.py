"""The numpy API's epilogues: conv2d's bias, scale, z, alpha, beta, activation and y, the
gradients' alpha and beta, batch-norm folding end to end, bad arrays refused before OpenCL."""
import convsolve
import numpy as np
import pytest
from convsolve import Epilogue, Problem, ValidationError, reference

RNG = np.random.default_rng(11)
X = RNG.uniform(-1, 1, (2, 4, 7, 6)).astype(np.float32)
W = RNG.uniform(-1, 1, (6, 2, 3, 3)).astype(np.float32)
KW = {"stride": (2, 1), "padding": 1, "groups": 2}
PROBLEM = Problem.conv2d(X.shape, W.shape, **KW)
K = PROBLEM.k


def test_conv2d_with_every_part_matches_reference(handle):
    """act(alpha conv * scale + bias + z_scale z) + beta y, against the float64 reference."""
    scale, bias = (RNG.uniform(-2, 2, K).astype(np.float32) for _ in range(2))
    z, y = (RNG.uniform(-1, 1, PROBLEM.y.shape).astype(np.float32) for _ in range(2))
    values = {"alpha": -0.75, "beta": 0.5, "z_scale": 1.5, "activation": ("elu", 0.3)}
    got = convsolve.conv2d(X, W, **KW, scale=scale, bias=bias, z=z, y=y, **values,
                           handle=handle)
    problem = PROBLEM.with_epilogue(Epilogue(True, True, True, "elu", True))
    expected = reference.compute(problem, X, W, y, scale=scale, bias=bias, z=z, **values)
    assert reference.relative_error(got, expected) < 1e-5
    nan_y = np.full(PROBLEM.y.shape, np.nan, np.float32)   # beta = 0: y is not read
    got = convsolve.conv2d(X, W, **KW, bias=bias, activation="relu", y=nan_y, handle=handle)
    expected = np.maximum(reference.forward(PROBLEM, X, W) + bias[:, None, None], 0)
    assert reference.relative_error(got, expected) < 1e-5


def test_folded_batch_norm_end_to_end(handle):
    """conv2d with fold_batch_norm's scale and bias, then relu, is relu(bn(conv + b))."""
    gamma, beta, mean = (RNG.standard_normal(K) for _ in range(3))
    var, b = RNG.uniform(0.5, 2, K), RNG.standard_normal(K)
    scale, shift = convsolve.fold_batch_norm(gamma, beta, mean, var, 1e-5, b)
    got = convsolve.conv2d(X, W, **KW, scale=scale, bias=shift, activation="relu",
                           handle=handle)
    conv = reference.forward(PROBLEM, X, W) + b[:, None, None]
    bn = gamma[:, None, None] * (conv - mean[:, None, None]) / np.sqrt(
        var[:, None, None] + 1e-5) + beta[:, None, None]
    assert reference.relative_error(got, np.maximum(bn, 0)) < 1e-5


def test_gradients_take_alpha_and_beta(handle):
    """dx = alpha * conv_bwd + beta * dx_prior, dw likewise; a zero batch's dw is beta * dw."""
    dy = RNG.uniform(-1, 1, PROBLEM.y.shape).astype(np.float32)
    dx0, dw0 = RNG.uniform(-1, 1, X.shape).astype(np.float32), W.copy()
    dx = convsolve.conv2d_backward_data(dy, W, X.shape, **KW, alpha=2.0, beta=-1.0, dx=dx0,
                                        handle=handle)
    expected = 2 * reference.backward_data(PROBLEM, dy, W) - dx0
    assert reference.relative_error(dx, expected) < 1e-5
    dw = convsolve.conv2d_backward_weights(dy, X, W.shape, **KW, alpha=0.5, beta=0.25, dw=dw0,
                                           handle=handle)
    expected = 0.5 * reference.backward_weights(PROBLEM, X, dy) + 0.25 * dw0
    assert reference.relative_error(dw, expected) < 1e-5
    empty = convsolve.conv2d_backward_weights(dy[:0], X[:0], W.shape, **KW, beta=0.25, dw=dw0)
    assert np.array_equal(empty, 0.25 * dw0)


@pytest.mark.parametrize("kwargs, message", [
    ({"bias": np.zeros(K)}, "invalid bias.dtype='float64'"),
    ({"bias": np.zeros(K + 1, np.float32)}, r"invalid bias.shape=\(7,\)"),
    ({"z": np.zeros((1, 1), np.float32)}, r"invalid z.shape"),
    ({"beta": 0.5}, "invalid y=None: beta=0.5"),
    ({"alpha": float("nan")}, "invalid alpha=nan"),
    ({"activation": "swish"}, "invalid activation='swish'"),
    ({"activation": ("elu", "a")}, "invalid activation.a='a'"),
    ({"activation": -1}, "invalid activation=-1"),
    ({"activation": ("tanh", 1.0, 1.0, 0.0, 2.0)}, r"invalid activation=\('tanh'"),
])
def test_bad_epilogue_arguments_name_the_field(kwargs, message):
    """Each bad epilogue argument is a ValidationError naming field and value, raised before
    anything reaches OpenCL (no handle is made)."""
    with pytest.raises(ValidationError, match=message):
        convsolve.conv2d(X, W, **KW, handle="not a handle", **kwargs)
