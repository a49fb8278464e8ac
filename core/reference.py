"""Numpy reference convolutions for the three directions, any spatial rank and layout,
accumulated in float64, with their epilogues (epilogue.py) and backward-bias.

Each works one filter tap at a time: the tap's strided window of the padded input meets every
output element, so a tap is one einsum over channels.  Slow but plainly correct; tests and the
driver's verification compare solvers against it.  Arrays are in each tensor's memory order
(its ``memory_shape``: (N, H, W, C) for NHWC), as the buffers hold them; the work is done in
logical order (N, C, spatial...).  An epilogue follows convsolve_epilogue.h operation by
operation (in float64), non-finite cases included.
"""
import functools
import itertools
import math
import operator
from collections.abc import Callable, Iterator
from typing import Any, cast

import numpy as np
from numpy.typing import ArrayLike

from .epilogue import Activation, Epilogue
from .problem import Direction, Problem, TensorDesc

_ALL = (slice(None),) * 3   # the (N, G, C/G) or (G, K/G, C/G) axes before the spatial ones


def _view(desc: TensorDesc, array: ArrayLike) -> np.ndarray:
    """``array`` (``desc``'s memory order, or flat) viewed in logical order (N, C, ...)."""
    return np.asarray(array).reshape(desc.memory_shape).transpose(np.argsort(desc.order))


def logical(desc: TensorDesc, array: ArrayLike) -> np.ndarray:
    """``array`` (``desc``'s memory order, or flat) as float64 in logical order (N, C, ...)."""
    return _view(desc, array).astype(np.float64)


def in_memory(desc: TensorDesc, array: np.ndarray) -> np.ndarray:
    """A logical-order ``array`` of ``desc`` in its memory order (C-contiguous)."""
    return np.ascontiguousarray(array.transpose(desc.order))


def _windows(problem: Problem, taps: tuple[int, ...]) -> tuple[slice, ...]:
    """Slices of the padded input touched by filter tap ``taps`` at every output element."""
    conv = problem.conv
    return tuple(slice(t * d, t * d + (o - 1) * u + 1, u) for t, d, o, u in zip(
        taps, conv.dilations, problem.out_sizes, conv.strides))


def _taps_of(problem: Problem) -> Iterator[tuple[int, ...]]:
    """Every filter tap, as one index per spatial dim."""
    return itertools.product(*(range(f) for f in problem.fil_sizes))


def _interior(problem: Problem) -> tuple[slice, ...]:
    """Slices of a padded input that hold the unpadded one."""
    return (slice(None), slice(None), *(slice(lo, lo + size) for (lo, _), size in zip(
        problem.conv.pads, problem.in_sizes)))


def _padded(problem: Problem) -> np.ndarray:
    """Zeros of the padded input's shape (N, C, padded sizes...)."""
    return np.zeros((problem.n, problem.c, *(size + lo + hi for (lo, hi), size in zip(
        problem.conv.pads, problem.in_sizes))))


def _grouped_weights(problem: Problem, w: np.ndarray) -> np.ndarray:
    """Logical w (float64) as (G, K/G, C/G, filter...)."""
    return w.reshape(problem.groups, problem.k // problem.groups, *w.shape[1:])


def _grouped(array: np.ndarray, groups: int) -> np.ndarray:
    """(N, C, ...) -> (N, G, C/G, ...)."""
    return array.reshape(array.shape[0], groups, array.shape[1] // groups, *array.shape[2:])


def _forward(problem: Problem, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    g, xp = problem.groups, _padded(problem)
    xp[_interior(problem)] = x
    xg, wg = _grouped(xp, g), _grouped_weights(problem, w)
    y = np.zeros((problem.n, g, problem.k // g, *problem.out_sizes))
    for taps in _taps_of(problem):
        y += np.einsum("ngc...,gkc->ngk...", xg[_ALL + _windows(problem, taps)], wg[_ALL + taps])
    return y.reshape(problem.y.shape)


def _backward_data(problem: Problem, dy: np.ndarray, w: np.ndarray) -> np.ndarray:
    g = problem.groups
    dyg, wg = _grouped(dy, g), _grouped_weights(problem, w)
    dxp = _padded(problem)
    dxg = _grouped(dxp, g)   # a view: writes land in dxp
    for taps in _taps_of(problem):
        dxg[_ALL + _windows(problem, taps)] += np.einsum("ngk...,gkc->ngc...", dyg,
                                                         wg[_ALL + taps])
    return dxp[_interior(problem)]


def _backward_weights(problem: Problem, x: np.ndarray, dy: np.ndarray) -> np.ndarray:
    g, xp = problem.groups, _padded(problem)
    xp[_interior(problem)] = x
    xg, dyg = _grouped(xp, g), _grouped(dy, g)
    dw = np.zeros((g, problem.k // g, problem.c // g, *problem.fil_sizes))
    spatial = "dhw"[-problem.spatial_dims:]
    for taps in _taps_of(problem):
        dw[_ALL + taps] = np.einsum(f"ngk{spatial},ngc{spatial}->gkc", dyg,
                                    xg[_ALL + _windows(problem, taps)])
    return dw.reshape(problem.w.shape)


def forward(problem: Problem, x: ArrayLike, w: ArrayLike) -> np.ndarray:
    """y = conv(x, w) for ``problem`` (float64, y's memory order)."""
    return in_memory(problem.y, _forward(problem, logical(problem.x, x), logical(problem.w, w)))


def backward_data(problem: Problem, dy: ArrayLike, w: ArrayLike) -> np.ndarray:
    """dx for ``problem`` from dy and w (float64): the adjoint of forward in x."""
    return in_memory(problem.x, _backward_data(problem, logical(problem.y, dy),
                                               logical(problem.w, w)))


def backward_weights(problem: Problem, x: ArrayLike, dy: ArrayLike) -> np.ndarray:
    """dw for ``problem`` from x and dy (float64), summed over the batch."""
    return in_memory(problem.w, _backward_weights(problem, logical(problem.x, x),
                                                  logical(problem.y, dy)))


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
    """``problem.epilogue`` applied to the convolution's output ``conv`` (float64, the output's
    memory order): the whole output tensor, or its elements at flat ``index``.  ``prior`` is the
    output's prior contents (blend), ``z`` the residual (both in the output's layout),
    ``scale`` and ``bias`` one value per output channel, whatever the rank and layout; a
    coefficient of 0 leaves its operand unread."""
    # the caller's problem has an epilogue, and it passes the operands that epilogue reads
    structure = cast(Epilogue, problem.epilogue)
    desc = getattr(problem, problem.direction.output)
    axis = desc.order.index(1)   # where the channel axis lies in memory order, any layout
    if index is None:
        channel = np.arange(desc.shape[1]).reshape(
            [-1 if a == axis else 1 for a in range(len(desc.shape))])

        def take(array: ArrayLike | None) -> np.ndarray:
            return np.asarray(array, dtype=np.float64).reshape(desc.memory_shape)
    else:
        channel = np.unravel_index(index, desc.memory_shape)[axis]

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
    coefficient unread); dy channels-first, of any spatial rank."""
    total = np.asarray(dy, dtype=np.float64).sum(axis=(0, *range(2, np.ndim(dy)))) \
        if alpha != 0 else 0.0
    out = alpha * total + np.zeros(np.shape(dy)[1])
    return out + beta * np.asarray(db, dtype=np.float64) if beta != 0 else out

# }}}


# {{{ sampled outputs

#: Elements gathered per chunk of samples (bounds the memory of a sampled reference).
_CHUNK_ELEMENTS = 1 << 22


def _gather_padded(x: np.ndarray, n: np.ndarray, c: np.ndarray,
                   coords: list[np.ndarray]) -> np.ndarray:
    """Logical x[n, c, coords...] (float64, broadcast) with 0 where coords lie in the padding."""
    sizes = x.shape[2:]
    valid = functools.reduce(operator.and_, [(i >= 0) & (i < size) for i, size in zip(
        coords, sizes)])
    values = x[(n, c, *(np.clip(i, 0, size - 1) for i, size in zip(coords, sizes)))].astype(
        np.float64)
    return np.where(valid, values, 0.0)


def _along(axis: int, count: int, values: np.ndarray) -> np.ndarray:
    """``values`` along ``axis`` of ``count`` axes (size 1 elsewhere), for broadcasting."""
    return values.reshape([-1 if a == axis else 1 for a in range(count)])


def _coords(desc: TensorDesc, index: np.ndarray, count: int) -> list[np.ndarray]:
    """The logical coordinates of flat memory ``index`` (int arrays along axis 0 of ``count``)."""
    memory = np.unravel_index(index, desc.memory_shape)
    return [_along(0, count, memory[desc.order.index(axis)]) for axis in range(len(desc.shape))]


def _taps(problem: Problem, first: int, count: int) -> list[np.ndarray]:
    """Filter tap indices per spatial dim, along axes ``first``, ``first + 1``, ... of ``count``."""
    return [_along(first + j, count, np.arange(f)) for j, f in enumerate(problem.fil_sizes)]


def _forward_at(problem: Problem, x: np.ndarray, w: np.ndarray, index: np.ndarray) -> np.ndarray:
    count = problem.spatial_dims + 2   # samples, channels of the group, taps
    n, k, *out = _coords(problem.y, index, count)
    conv, cpg, kpg = problem.conv, problem.c // problem.groups, problem.k // problem.groups
    c = (k // kpg) * cpg + _along(1, count, np.arange(cpg))
    coords = [o * u - lo + t * d for o, u, (lo, _), t, d in zip(
        out, conv.strides, conv.pads, _taps(problem, 2, count), conv.dilations)]
    patch = _gather_padded(x, n, c, coords)
    return (patch * w[k.reshape(-1)]).sum(axis=tuple(range(1, count)))


def _backward_data_at(problem: Problem, dy: np.ndarray, w: np.ndarray,
                      index: np.ndarray) -> np.ndarray:
    count = problem.spatial_dims + 2
    n, c, *at = _coords(problem.x, index, count)
    conv, cpg, kpg = problem.conv, problem.c // problem.groups, problem.k // problem.groups
    k = (c // cpg) * kpg + _along(1, count, np.arange(kpg))
    taps = _taps(problem, 2, count)
    reach = [i + lo - t * d for i, (lo, _), t, d in zip(at, conv.pads, taps, conv.dilations)]
    valid = functools.reduce(operator.and_, [   # where tap t reaches i: r = o * u
        (r >= 0) & (r % u == 0) & (r // u < o)
        for r, u, o in zip(reach, conv.strides, problem.out_sizes)])
    out = [np.clip(r // u, 0, o - 1) for r, u, o in zip(reach, conv.strides, problem.out_sizes)]
    with np.errstate(invalid="ignore"):
        products = dy[(n, k, *out)].astype(np.float64) * w[(k, c % cpg, *taps)]
    return np.where(valid, products, 0.0).sum(axis=tuple(range(1, count)))


def _backward_weights_at(problem: Problem, x: np.ndarray, dy: np.ndarray,
                         index: np.ndarray) -> np.ndarray:
    count = problem.spatial_dims + 2   # samples, images, output positions
    k, c, *taps = _coords(problem.w, index, count)
    conv, cpg, kpg = problem.conv, problem.c // problem.groups, problem.k // problem.groups
    n = _along(1, count, np.arange(problem.n))
    out = [_along(2 + j, count, np.arange(o)) for j, o in enumerate(problem.out_sizes)]
    coords = [o * u - lo + t * d for o, u, (lo, _), t, d in zip(
        out, conv.strides, conv.pads, taps, conv.dilations)]
    patch = _gather_padded(x, n, (k // kpg) * cpg + c, coords)
    return (patch * dy[(n, k, *out)]).sum(axis=tuple(range(1, count)))


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
    taps, kpg = math.prod(problem.fil_sizes), problem.k // problem.groups
    if problem.direction is Direction.FORWARD:
        at, a, b = _forward_at, (problem.x, x), (problem.w, w)
        per_sample = problem.w.size // problem.k
    elif problem.direction is Direction.BACKWARD_DATA:
        at, a, b, per_sample = _backward_data_at, (problem.y, y), (problem.w, w), kpg * taps
    else:
        at, a, b = _backward_weights_at, (problem.x, x), (problem.y, y)
        per_sample = problem.n * math.prod(problem.out_sizes)
    step = max(1, _CHUNK_ELEMENTS // max(per_sample, 1))
    # the ignore: as in compute(), the direction's inputs a and b are arrays
    first, second = _view(*a), _view(*b)  # type: ignore[arg-type]  # views: no copy
    parts = [at(problem, first, second, index[i:i + step]) for i in range(0, index.size, step)]
    return np.concatenate(parts) if parts else np.zeros(0)

# }}}


def relative_error(result: ArrayLike, expected: ArrayLike, dtype: type = np.float64) -> float:
    """RMS of the difference over the RMS of the expected values (0 for two empty arrays),
    computed in ``dtype``: float32 compares two float32 outputs 3x faster than float64's copies
    (a tuning search's check of each config) and agrees with it to about 1e-7 of the value."""
    expected = np.asarray(expected, dtype=dtype)
    scale = np.sqrt(np.mean(np.square(expected))) if expected.size else 0.0
    diff = np.sqrt(np.mean(np.square(np.asarray(result, dtype=dtype) - expected))) if expected.size else 0.0
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
