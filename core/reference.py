"""Numpy reference convolutions for the three directions, accumulated in float64, with their
epilogues (epilogue.py) and backward-bias.

Each works one filter tap (r, s) at a time: the tap's strided window of the padded input meets
every output pixel, so a tap is one einsum over channels.  Slow but plainly correct; tests and the
driver's verification compare solvers against it.  An epilogue follows convsolve_epilogue.h
operation by operation (in float64), non-finite cases included.
"""
from collections.abc import Callable
from typing import Any, cast

import numpy as np
from numpy.typing import ArrayLike

from .epilogue import Activation, Epilogue
from .problem import Direction, Problem


def _window(problem: Problem, r: int, s: int) -> tuple[slice, slice]:
    """Slices of the padded input touched by filter tap (r, s) at every output pixel."""
    (u, v), (dh, dw) = problem.conv.strides, problem.conv.dilations
    top, left = r * dh, s * dw
    return (slice(top, top + (problem.out_h - 1) * u + 1, u),
            slice(left, left + (problem.out_w - 1) * v + 1, v))


def _padded_shape(problem: Problem) -> tuple[int, int, int, int]:
    (pt, pb), (pl, pr) = problem.conv.pads
    return (problem.n, problem.c, problem.in_h + pt + pb, problem.in_w + pl + pr)


def _interior(problem: Problem) -> tuple[slice, slice, slice, slice]:
    """Slices of a padded input that hold the unpadded one."""
    (pt, _), (pl, _) = problem.conv.pads
    return (slice(None), slice(None), slice(pt, pt + problem.in_h), slice(pl, pl + problem.in_w))


def _padded_groups(problem: Problem, x: ArrayLike) -> np.ndarray:
    """x zero-padded (float64), as (N, G, C/G, H + pads, W + pads)."""
    xp = np.zeros(_padded_shape(problem))
    xp[_interior(problem)] = x
    return _grouped(xp, problem.groups)


def _grouped_weights(problem: Problem, w: np.ndarray) -> np.ndarray:
    """w (float64) as (G, K/G, C/G, R, S)."""
    return w.astype(np.float64).reshape(problem.groups, problem.k // problem.groups, *w.shape[1:])


def _grouped(array: np.ndarray, groups: int) -> np.ndarray:
    """(N, C, ...) -> (N, G, C/G, ...)."""
    return array.reshape(array.shape[0], groups, array.shape[1] // groups, *array.shape[2:])


def forward(problem: Problem, x: ArrayLike, w: np.ndarray) -> np.ndarray:
    """y = conv(x, w) for ``problem`` (float64)."""
    g = problem.groups
    xg, wg = _padded_groups(problem, x), _grouped_weights(problem, w)
    y = np.zeros((problem.n, g, problem.k // g, problem.out_h, problem.out_w))
    for r in range(problem.fil_h):
        for s in range(problem.fil_w):
            rows, cols = _window(problem, r, s)
            y += np.einsum("ngchw,gkc->ngkhw", xg[:, :, :, rows, cols], wg[:, :, :, r, s])
    return y.reshape(problem.y.shape)


def backward_data(problem: Problem, dy: np.ndarray, w: np.ndarray) -> np.ndarray:
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


def backward_weights(problem: Problem, x: ArrayLike, dy: np.ndarray) -> np.ndarray:
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


def compute(problem: Problem, x: np.ndarray | None, w: np.ndarray | None,
            y: np.ndarray | None, **values: Any) -> np.ndarray:
    """The output of ``problem``'s direction from the other two forward-sense tensors; with an
    epilogue, the output tensor's argument is its prior contents and ``values`` are epilogue()'s
    keyword arguments (alpha, beta, z_scale, activation, scale, bias, z)."""
    # ignores: the direction's two inputs are arrays, only its output's argument may be None
    if problem.direction is Direction.FORWARD:
        out = forward(problem, x, w)  # type: ignore[arg-type]
    elif problem.direction is Direction.BACKWARD_DATA:
        out = backward_data(problem, y, w)  # type: ignore[arg-type]
    else:
        out = backward_weights(problem, x, y)  # type: ignore[arg-type]
    if problem.epilogue is None:
        return out
    return epilogue(problem, out, {"x": x, "w": w, "y": y}[problem.direction.output], **values)


# {{{ epilogues and backward-bias

def activate(activation: Activation | str | None, v: np.ndarray) -> np.ndarray:
    """``activation`` (an Activation, a name or None) of float64 ``v``, as convsolve_epilogue.h
    computes it (its parameters rounded to float32, as the kernels take them)."""
    act = Activation.parse(activation)
    a, b, g = (float(p) for p in act.params)
    with np.errstate(all="ignore"):
        return {
            "identity": lambda: v,
            "logistic": lambda: 1.0 / (1.0 + np.exp(-v)),
            "tanh": lambda: b * np.tanh(a * v),
            "relu": lambda: np.maximum(v, 0.0),
            "softrelu": lambda: np.where(v > 0, v + np.log1p(np.exp(-v)), np.log1p(np.exp(v))),
            "abs": lambda: np.abs(v),
            "power": lambda: np.where(a + b * v == 0, 0.0, np.power(a + b * v, g)),
            "clipped_relu": lambda: np.where(np.isnan(v), v, np.minimum(np.maximum(v, 0.0), a)),
            "leaky_relu": lambda: np.where(v <= 0, a * v if a != 0 else 0.0, v),
            "elu": lambda: np.where(v <= 0, a * np.expm1(v), v),
        }[act.mode]()


def epilogue(problem: Problem, conv: ArrayLike, prior: ArrayLike | None = None,
             index: np.ndarray | None = None, *, alpha: float = 1.0, beta: float = 0.0,
             z_scale: float = 1.0, activation: Activation | str | None = None,
             scale: ArrayLike | None = None, bias: ArrayLike | None = None,
             z: ArrayLike | None = None) -> np.ndarray:
    """``problem.epilogue`` applied to the convolution's output ``conv`` (float64): the whole
    output tensor, or its elements at flat ``index``.  ``prior`` is the output's prior contents
    (blend), ``z`` the residual (both of the output's shape), ``scale`` and ``bias`` one value per
    output channel; a coefficient of 0 leaves its operand unread."""
    # the caller's problem has an epilogue, and it passes the operands that epilogue reads
    structure = cast(Epilogue, problem.epilogue)
    shape = getattr(problem, problem.direction.output).shape
    if index is None:
        channel = np.arange(shape[1]).reshape(1, -1, 1, 1)

        def take(array: ArrayLike | None) -> np.ndarray:
            return np.asarray(array, dtype=np.float64)
    else:
        channel = np.unravel_index(index, shape)[1]

        def take(array: ArrayLike | None) -> np.ndarray:
            return np.asarray(array).ravel()[index].astype(np.float64)
    with np.errstate(all="ignore"):
        out = alpha * np.asarray(conv, dtype=np.float64) if alpha != 0 else np.zeros(
            np.shape(conv))
        if structure.scale:
            out = out * np.asarray(scale, dtype=np.float64)[channel]
        if structure.bias:
            out = out + np.asarray(bias, dtype=np.float64)[channel]
        if structure.residual and z_scale != 0:
            out = out + z_scale * take(z)
        out = activate(activation if activation is not None else structure.activation, out)
        if structure.blend and beta != 0:
            out = out + beta * take(prior)
    return out


def backward_bias(dy: ArrayLike, alpha: float = 1.0, beta: float = 0.0,
                  db: ArrayLike | None = None) -> np.ndarray:
    """db = alpha * dy summed over images and pixels + beta * db (float64; operands of a zero
    coefficient unread)."""
    total = np.asarray(dy, dtype=np.float64).sum(axis=(0, 2, 3)) if alpha != 0 else 0.0
    out = alpha * total + np.zeros(np.shape(dy)[1])
    return out + beta * np.asarray(db, dtype=np.float64) if beta != 0 else out

# }}}


# {{{ sampled outputs

#: Elements gathered per chunk of samples (bounds the memory of a sampled reference).
_CHUNK_ELEMENTS = 1 << 22


def _gather_padded(x: np.ndarray, n: np.ndarray, c: np.ndarray, ih: np.ndarray,
                   iw: np.ndarray) -> np.ndarray:
    """x[n, c, ih, iw] (float64, broadcast) with 0 where (ih, iw) lies in the zero padding."""
    h, w = x.shape[2:]
    valid = (ih >= 0) & (ih < h) & (iw >= 0) & (iw < w)
    values = x[n, c, np.clip(ih, 0, h - 1), np.clip(iw, 0, w - 1)].astype(np.float64)
    return np.where(valid, values, 0.0)


def _taps(problem: Problem) -> tuple[np.ndarray, np.ndarray]:
    """Filter rows and columns (r, s) as arrays along the last two of four axes."""
    return (np.arange(problem.fil_h)[None, None, :, None],
            np.arange(problem.fil_w)[None, None, None, :])


def _forward_at(problem: Problem, x: np.ndarray, w: np.ndarray, index: np.ndarray) -> np.ndarray:
    n, k, oh, ow = (a[:, None, None, None] for a in np.unravel_index(index, problem.y.shape))
    (u, v), (dh, dw) = problem.conv.strides, problem.conv.dilations
    (pt, _), (pl, _) = problem.conv.pads
    cpg, kpg = problem.c // problem.groups, problem.k // problem.groups
    c = (k // kpg) * cpg + np.arange(cpg)[None, :, None, None]
    r, s = _taps(problem)
    patch = _gather_padded(x, n, c, oh * u - pt + r * dh, ow * v - pl + s * dw)
    return (patch * w[k[:, 0, 0, 0]].astype(np.float64)).sum(axis=(1, 2, 3))


def _backward_data_at(problem: Problem, dy: np.ndarray, w: np.ndarray,
                      index: np.ndarray) -> np.ndarray:
    n, c, h, iw = (a[:, None, None, None] for a in np.unravel_index(index, problem.x.shape))
    (u, v), (dh, dw) = problem.conv.strides, problem.conv.dilations
    (pt, _), (pl, _) = problem.conv.pads
    cpg, kpg = problem.c // problem.groups, problem.k // problem.groups
    k = (c // cpg) * kpg + np.arange(kpg)[None, :, None, None]
    r, s = _taps(problem)
    th, tw = h + pt - r * dh, iw + pl - s * dw     # = (oh * u, ow * v) where tap (r, s) reaches
    valid = ((th >= 0) & (th % u == 0) & (th // u < problem.out_h)
             & (tw >= 0) & (tw % v == 0) & (tw // v < problem.out_w))
    oh, ow = np.clip(th // u, 0, problem.out_h - 1), np.clip(tw // v, 0, problem.out_w - 1)
    with np.errstate(invalid="ignore"):
        products = dy[n, k, oh, ow].astype(np.float64) * w[k, c % cpg, r, s]
    return np.where(valid, products, 0.0).sum(axis=(1, 2, 3))


def _backward_weights_at(problem: Problem, x: np.ndarray, dy: np.ndarray,
                         index: np.ndarray) -> np.ndarray:
    k, c, r, s = (a[:, None, None, None] for a in np.unravel_index(index, problem.w.shape))
    (u, v), (dh, dw) = problem.conv.strides, problem.conv.dilations
    (pt, _), (pl, _) = problem.conv.pads
    cpg, kpg = problem.c // problem.groups, problem.k // problem.groups
    n = np.arange(problem.n)[None, :, None, None]
    oh = np.arange(problem.out_h)[None, None, :, None]
    ow = np.arange(problem.out_w)[None, None, None, :]
    patch = _gather_padded(x, n, (k // kpg) * cpg + c, oh * u - pt + r * dh, ow * v - pl + s * dw)
    return (patch * dy[n, k, oh, ow].astype(np.float64)).sum(axis=(1, 2, 3))


def compute_at(problem: Problem, x: np.ndarray | None, w: np.ndarray | None,
               y: np.ndarray | None, index: ArrayLike, **values: Any) -> np.ndarray:
    """The elements at flat ``index`` (an int array) of ``problem``'s output, in float64.

    Each element is computed on its own from the inputs, so checking a few hundred elements of a
    large problem costs little; the values equal compute()'s at those indices, non-finite ones
    included, ``values`` being an epilogue's as compute() takes them.
    """
    index = np.asarray(index, dtype=np.int64)
    if problem.epilogue is not None:
        conv = compute_at(problem.with_epilogue(None), x, w, y, index)
        prior = {"x": x, "w": w, "y": y}[problem.direction.output]
        return epilogue(problem, conv, prior, index, **values)
    at: Callable[[Problem, np.ndarray, np.ndarray, np.ndarray], np.ndarray]
    if problem.direction is Direction.FORWARD:
        at, a, b, per_sample = _forward_at, x, w, problem.w.size // problem.k
    elif problem.direction is Direction.BACKWARD_DATA:
        at, a, b = _backward_data_at, y, w
        per_sample = problem.k // problem.groups * problem.fil_h * problem.fil_w
    else:
        at, a, b, per_sample = _backward_weights_at, x, y, problem.n * problem.out_h * problem.out_w
    step = max(1, _CHUNK_ELEMENTS // max(per_sample, 1))
    # the ignore: as in compute(), the direction's inputs a and b are arrays
    parts = [at(problem, a, b, index[i:i + step])  # type: ignore[arg-type]
             for i in range(0, index.size, step)]
    return np.concatenate(parts) if parts else np.zeros(0)

# }}}


def relative_error(result: ArrayLike, expected: ArrayLike) -> float:
    """RMS of the difference over the RMS of the expected values (0 for two empty arrays)."""
    expected = np.asarray(expected, dtype=np.float64)
    scale = np.sqrt(np.mean(expected ** 2)) if expected.size else 0.0
    diff = np.sqrt(np.mean((np.asarray(result, dtype=np.float64) - expected) ** 2)) if expected.size else 0.0
    return float(diff / scale) if scale > 0 else float(diff)


def mismatch(result: ArrayLike, expected: ArrayLike, tolerance: float,
             nonfinite: str = "exact") -> str | None:
    """Why ``result`` is not ``expected`` within ``tolerance``, or None.  ``nonfinite`` "exact":
    NaN, +inf and -inf exactly where the expected values have them; "spread" (a solver whose
    transforms spread a non-finite input): non-finite at least there.  The values finite on both
    sides must be within ``tolerance`` (relative_error)."""
    result, expected = np.asarray(result), np.asarray(expected)
    if nonfinite == "spread":
        missed = int((~np.isfinite(expected) & np.isfinite(result)).sum())
        if missed:
            return (f"{missed} outputs finite where the reference's are not (nonfinite = "
                    "'spread' still owes every one of them)")
    else:
        for what, test in (("NaN", np.isnan), ("+inf", np.isposinf), ("-inf", np.isneginf)):
            if not np.array_equal(test(result), test(expected)):
                return (f"{int(test(result).sum())} {what} in the output where the reference "
                        f"has {int(test(expected).sum())}")
    both = np.isfinite(expected) & np.isfinite(result)
    error = relative_error(result[both], expected[both])
    return f"relative error {error:.3g} >= {tolerance:g}" if not error < tolerance else None
