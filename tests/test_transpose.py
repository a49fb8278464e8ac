"""Transposed convolution: Problem.conv_transpose2d's mapping and conv_transpose2d, against
independent float64 loops written here with PyTorch's ConvTranspose2d semantics."""
import numpy as np
import pytest
from convsolve import Direction, Problem, ValidationError, conv_transpose2d, reference

# (x shape, w shape, stride, padding, output_padding, groups, dilation)
CASES = [
    ((2, 4, 5, 4), (4, 3, 3, 3), 1, 0, 0, 1, 1),
    ((1, 3, 4, 5), (3, 2, 3, 2), 2, 1, 1, 1, 1),
    ((2, 4, 3, 4), (4, 1, 2, 3), 3, (1, 0), (2, 1), 2, 1),
    ((1, 6, 4, 3), (6, 2, 3, 3), (2, 3), (0, 1), (1, 2), 3, (2, 1)),
    ((1, 2, 5, 5), (2, 2, 3, 3), 1, 1, 0, 1, 2),
    ((1, 2, 3, 4), (2, 3, 2, 2), (3, 1), 0, (2, 0), 1, (1, 3)),
]
ZERO_TAIL = ((1, 2, 4, 4), (2, 2, 3, 3), 1, 0, 1, 1, 2)   # output_padding past every input


def _pairs(*values):
    return [v if isinstance(v, tuple) else (v, v) for v in values]


def _taps(x_shape, w_shape, stride, padding, output_padding, dilation):
    """Output size and every (input row/col, tap, output row/col) of each axis, PyTorch's way."""
    axes = []
    for size, fil, u, p, e, d in zip(x_shape[2:], w_shape[2:],
                                     *_pairs(stride, padding, output_padding, dilation)):
        out = (size - 1) * u - 2 * p + d * (fil - 1) + e + 1
        axes.append((out, [(i, r, i * u - p + r * d) for i in range(size) for r in range(fil)
                           if 0 <= i * u - p + r * d < out]))
    return axes


def scatter(x, w, stride, padding, output_padding, groups, dilation):
    """The transposed convolution: each input pixel scatters w's taps into the output."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    (oh, rows), (ow, cols) = _taps(x.shape, w.shape, stride, padding, output_padding, dilation)
    cin, cout = x.shape[1] // groups, w.shape[1]
    y = np.zeros((x.shape[0], cout * groups, oh, ow))
    for g in range(groups):
        for i, r, o in rows:
            for j, s, q in cols:
                y[:, g * cout:(g + 1) * cout, o, q] += np.einsum(
                    "nc,ck->nk", x[:, g * cin:(g + 1) * cin, i, j],
                    w[g * cin:(g + 1) * cin, :, r, s])
    return y


def gather_weights(x, dy, w_shape, stride, padding, output_padding, groups, dilation):
    """dW of the transposed convolution: each tap sums input times the dy pixel it reached."""
    x = x.astype(np.float64)
    (_, rows), (_, cols) = _taps(x.shape, w_shape, stride, padding, output_padding, dilation)
    cin, cout = x.shape[1] // groups, w_shape[1]
    dw = np.zeros(w_shape)
    for g in range(groups):
        for i, r, o in rows:
            for j, s, q in cols:
                dw[g * cin:(g + 1) * cin, :, r, s] += np.einsum(
                    "nc,nk->ck", x[:, g * cin:(g + 1) * cin, i, j],
                    dy[:, g * cout:(g + 1) * cout, o, q])
    return dw


def _data(case, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(case[0]).astype(np.float32),
            rng.standard_normal(case[1]).astype(np.float32))


@pytest.mark.parametrize("case", CASES)
def test_mapping_computes_all_three_directions(case):
    """The Problem of each transposed direction, computed by the core's reference, equals the
    independent loops: forward, backward-data (its adjoint) and backward-weights."""
    x, w = _data(case)
    args = case[2:]
    y = scatter(x, w, *args)
    dy = np.random.default_rng(1).standard_normal(y.shape)
    fwd, bwd, wrw = (Problem.conv_transpose2d(x.shape, w.shape, *args, direction=d)
                     for d in Direction)
    assert (fwd.direction, bwd.direction, wrw.direction) == (
        Direction.BACKWARD_DATA, Direction.FORWARD, Direction.BACKWARD_WEIGHTS)
    assert fwd.x.shape == y.shape and fwd.y.shape == x.shape and fwd.w.shape == w.shape
    np.testing.assert_allclose(reference.compute(fwd, None, w, x), y, rtol=1e-10, atol=1e-10)
    dx = reference.compute(bwd, dy, w, None)   # <T x, dy> = <x, T* dy>
    assert np.isclose(np.vdot(y, dy), np.vdot(x, dx), rtol=1e-9)
    np.testing.assert_allclose(reference.compute(wrw, dy, None, x),
                               gather_weights(x, dy, w.shape, *args), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("case", [CASES[1], CASES[3], ZERO_TAIL])
def test_conv_transpose2d_matches_pytorch_semantics(case, handle):
    """conv_transpose2d on the device equals the scatter loops, trailing zero rows included."""
    x, w = _data(case)
    y = conv_transpose2d(x, w, *case[2:], handle=handle)
    np.testing.assert_allclose(y, scatter(x, w, *case[2:]), rtol=1e-4, atol=1e-4)


def test_key_is_the_mapped_directions():
    """The find-db key is the convolution's: a stride-2 transposed forward is its bwd key."""
    p = Problem.conv_transpose2d((8, 64, 28, 28), (64, 32, 3, 3), 2, 1, 1)
    assert p.key() == "bwd-n8-c32-h56-w56-k64-y3-x3-p1.1-q1.1-u2-v2-l1-j1-g1-float32-NCHW"


@pytest.mark.parametrize("kwargs, field", [
    ({"output_padding": 2, "stride": 2}, "output_padding"),
    ({"output_padding": 1}, "output_padding"),
    ({"groups": 3}, "groups"),
    ({"w_shape": (3, 2, 3, 3)}, "w_shape[0] (C_in)"),
    ({"padding": 5}, "output height"),
    ({"output_padding": 1, "dilation": 2}, "output_padding"),   # rows no input reaches
])
def test_invalid_transposed_problems_name_the_field(kwargs, field):
    """output_padding below stride or dilation (PyTorch's rule), channels, sizes: each named."""
    args = {"x_shape": (1, 4, 4, 4), "w_shape": (4, 2, 3, 3), **kwargs}
    with pytest.raises(ValidationError) as info:
        Problem.conv_transpose2d(**args)
    assert info.value.field == field
