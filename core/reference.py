"""Numpy reference convolutions for the three directions, accumulated in float64.

Each works one filter tap (r, s) at a time: the tap's strided window of the padded input meets
every output pixel, so a tap is one einsum over channels.  Slow but plainly correct; tests and the
driver's verification compare solvers against it.
"""
import numpy as np

from .problem import Direction


def _window(problem, r, s):
    """Slices of the padded input touched by filter tap (r, s) at every output pixel."""
    (u, v), (dh, dw) = problem.conv.strides, problem.conv.dilations
    top, left = r * dh, s * dw
    return (slice(top, top + (problem.out_h - 1) * u + 1, u),
            slice(left, left + (problem.out_w - 1) * v + 1, v))


def _padded_shape(problem):
    (pt, pb), (pl, pr) = problem.conv.pads
    return (problem.n, problem.c, problem.in_h + pt + pb, problem.in_w + pl + pr)


def _interior(problem):
    """Slices of a padded input that hold the unpadded one."""
    (pt, _), (pl, _) = problem.conv.pads
    return (slice(None), slice(None), slice(pt, pt + problem.in_h), slice(pl, pl + problem.in_w))


def _padded_groups(problem, x):
    """x zero-padded (float64), as (N, G, C/G, H + pads, W + pads)."""
    xp = np.zeros(_padded_shape(problem))
    xp[_interior(problem)] = x
    return _grouped(xp, problem.groups)


def _grouped_weights(problem, w):
    """w (float64) as (G, K/G, C/G, R, S)."""
    return w.astype(np.float64).reshape(problem.groups, problem.k // problem.groups, *w.shape[1:])


def _grouped(array, groups):
    """(N, C, ...) -> (N, G, C/G, ...)."""
    return array.reshape(array.shape[0], groups, array.shape[1] // groups, *array.shape[2:])


def forward(problem, x, w):
    """y = conv(x, w) for ``problem`` (float64)."""
    g = problem.groups
    xg, wg = _padded_groups(problem, x), _grouped_weights(problem, w)
    y = np.zeros((problem.n, g, problem.k // g, problem.out_h, problem.out_w))
    for r in range(problem.fil_h):
        for s in range(problem.fil_w):
            rows, cols = _window(problem, r, s)
            y += np.einsum("ngchw,gkc->ngkhw", xg[:, :, :, rows, cols], wg[:, :, :, r, s])
    return y.reshape(problem.y.shape)


def backward_data(problem, dy, w):
    """dx for ``problem`` from dy and w (float64): the adjoint of forward in x."""
    g = problem.groups
    dyg, wg = _grouped(dy.astype(np.float64), g), _grouped_weights(problem, w)
    dxp = np.zeros(_padded_shape(problem))
    dxg = _grouped(dxp, g)   # a view: writes land in dxp
    for r in range(problem.fil_h):
        for s in range(problem.fil_w):
            rows, cols = _window(problem, r, s)
            dxg[:, :, :, rows, cols] += np.einsum("ngkhw,gkc->ngchw", dyg, wg[:, :, :, r, s])
    return dxp[_interior(problem)].copy()


def backward_weights(problem, x, dy):
    """dw for ``problem`` from x and dy (float64), summed over the batch."""
    g = problem.groups
    xg = _padded_groups(problem, x)
    dyg = _grouped(dy.astype(np.float64), g)
    dw = np.zeros((g, problem.k // g, problem.c // g, problem.fil_h, problem.fil_w))
    for r in range(problem.fil_h):
        for s in range(problem.fil_w):
            rows, cols = _window(problem, r, s)
            dw[:, :, :, r, s] = np.einsum("ngkhw,ngchw->gkc", dyg, xg[:, :, :, rows, cols])
    return dw.reshape(problem.w.shape)


def compute(problem, x, w, y):
    """The output of ``problem``'s direction from the other two forward-sense tensors."""
    if problem.direction is Direction.FORWARD:
        return forward(problem, x, w)
    if problem.direction is Direction.BACKWARD_DATA:
        return backward_data(problem, y, w)
    return backward_weights(problem, x, y)


def relative_error(result, expected):
    """RMS of the difference over the RMS of the expected values (0 for two empty arrays)."""
    expected = np.asarray(expected, dtype=np.float64)
    scale = np.sqrt(np.mean(expected ** 2)) if expected.size else 0.0
    diff = np.sqrt(np.mean((np.asarray(result, dtype=np.float64) - expected) ** 2)) if expected.size else 0.0
    return float(diff / scale) if scale > 0 else float(diff)
