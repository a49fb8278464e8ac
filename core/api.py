"""The numpy API: convolutions on host arrays or pyopencl arrays, following the find mode or a
named solver."""
import functools
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array
from numpy.typing import ArrayLike

from .device.handle import Handle
from .device.tensors import (
    FLOAT32_ONLY,
    HostOutput,
    array_buffer,
    check_out,
    check_shape,
    host_buffer,
    pad_planes,
)
from .device.weights_cache import check_keywords
from .engine.bias_grad import backward_bias, dy_desc
from .engine.find import FindMode, find
from .engine.fusion import candidates, epilogue_args
from .engine.plan import Plan, plan
from .engine.run import check_device_limits, check_handle, check_problem, check_tensors_fit
from .engine.solutions import ranked_without_benchmark
from .epilogue import Activation, Epilogue, finite
from .errors import ValidationError
from .hookspecs import Buffers
from .problem import (
    Direction,
    IntPair,
    LayoutSpec,
    Padding,
    Problem,
    Shape,
    TensorDesc,
    split_output_padding,
    tensor_layouts,
)
from .solvers.policy import Policy

#: An activation as the numpy API takes it: a name (or MIOpen's name or mode number), a tuple
#: (name, a[, b[, g]]), a convsolve.Activation, or None (identity).
ActivationLike = str | int | Sequence[str | float] | Activation | None

#: A tensor as the numpy API takes it: anything numpy makes a float32 array of without a cast,
#: or a pyopencl Array on the handle's context (the result is then one, left on the device).
TensorLike = ArrayLike | cl_array.Array
#: What the numpy API returns: a host array, or a pyopencl Array when given one.
Tensor = np.ndarray | cl_array.Array

#: The epilogue's scalars at the values that leave the bare convolution.
_DEFAULTS = {"alpha": 1.0, "beta": 0.0, "z_scale": 1.0}

_default_handle: Handle | None = None
_default_lock = threading.Lock()


def default_handle() -> Handle:
    """The process's shared Handle on the default device (CONVSOLVE_DEVICE), made on first use."""
    global _default_handle
    with _default_lock:
        if _default_handle is None:
            _default_handle = Handle()
        return _default_handle


def _plain(value: object) -> bool:
    """Whether ``value`` is an int (not a bool or numpy's), or tuples of them: arguments that
    equal only arguments of the same meaning, so they may key a cache."""
    return type(value) is int or (type(value) is tuple and all(map(_plain, value)))


@functools.lru_cache(maxsize=512)
def _known_problem(rank: int, layout: str | None, *args: Any) -> Problem:
    return Problem.convolution(*args, layout=layout, spatial_dims=rank)


def _logical(shape: Any, layout: str) -> Any:
    """A tensor's shape as its array has it (``layout``'s order: (N, H, W, C) for NHWC) in
    logical order (N, C, spatial...); anything but a tuple or list of 3 sizes or more as is
    (Problem.convolution refuses it, naming the field)."""
    if not isinstance(shape, (tuple, list)) or len(shape) < 3 or not layout.endswith("C"):
        return shape
    return (shape[0], shape[-1], *shape[1:-1])


def _problem(rank: int, layout: LayoutSpec, x_shape: Any, w_shape: Any, *args: Any) -> Problem:
    """Problem.convolution of ``rank`` from the arrays' shapes (in ``layout``'s order) and the
    rest of its arguments (stride, padding, dilation, groups[, direction]); kept for plain
    arguments: a call on a known shape skips the 15 us of checks (a failed check is not
    kept)."""
    if layout is not None:   # channels-first (None) needs no reordering
        layouts = tensor_layouts(layout, rank)
        x_shape, w_shape = _logical(x_shape, layouts["x"]), _logical(w_shape, layouts["w"])
    args = (x_shape, w_shape, *args)
    if all(map(_plain, args[:6])) and all(type(a) in (str, Direction) for a in args[6:]) \
            and (layout is None or isinstance(layout, str)):
        return _known_problem(rank, layout, *args)
    return Problem.convolution(*args, layout=layout, spatial_dims=rank)


def _host_array(name: str, array: TensorLike) -> Tensor:
    """``array`` as a float32 ndarray, other dtypes refused, not cast; a view stays a view, so
    that shapes and sizes are checked before anything is copied (_buffer copies).  A pyopencl
    Array stays one (its dtype checked here, the rest by tensors.array_buffer)."""
    if not isinstance(array, cl_array.Array):
        try:
            array = np.asarray(array)
        except (ValueError, TypeError) as exc:   # ragged nested sequences, objects numpy refuses
            raise ValidationError(name, type(array).__name__, f"not an array: {exc}") from None
    if array.dtype != np.float32:
        raise ValidationError(f"{name}.dtype", str(array.dtype), FLOAT32_ONLY)
    return array


def _buffer(handle: Handle, name: str, array: Tensor) -> cl.Buffer:
    """A read-only device buffer with ``array``'s contents: a host array's copy or the array
    itself (tensors.host_buffer), a pyopencl Array's own buffer (tensors.array_buffer)."""
    if isinstance(array, cl_array.Array):
        return array_buffer(name, array, array.shape, handle)
    return host_buffer(handle, array)


def _device_copy(handle: Handle, name: str, array: Tensor) -> cl_array.Array:
    """A pyopencl Array on the handle's queue holding a copy of ``array`` (host or device)."""
    if isinstance(array, cl_array.Array):
        array_buffer(name, array, array.shape, handle)   # checked: of the handle's context
        return array.copy(queue=handle.queue)
    return cl_array.to_device(handle.queue, np.ascontiguousarray(array))


def _on_host(array: Any) -> np.ndarray:
    """``array`` itself, or a pyopencl Array's host copy (waits)."""
    return array.get() if isinstance(array, cl_array.Array) else array


def _epilogue(problem: Problem, values: Mapping[str, Any],
              prior: Tensor | None) -> tuple[Problem, dict[str, Any]]:
    """``problem`` with the epilogue the numpy arguments ``values`` ask for (None when they are
    the defaults: the bare convolution), and ``values`` with their host arrays checked;
    ``prior`` is the output's prior contents (needed when beta != 0)."""
    values = {name: value for name, value in values.items() if value is not None}
    if all(type(values[name]) in (int, float) and values[name] == default
           for name, default in _DEFAULTS.items() if name in values) \
            and set(values) <= set(_DEFAULTS):
        return problem, {}   # the bare convolution (the common case, checked quickly)
    for name in ("alpha", "beta", "z_scale"):
        if name in values:
            values[name] = finite(name, values[name])
    out = getattr(problem, problem.direction.output)
    for name, shape in (("scale", out.shape[1:2]), ("bias", out.shape[1:2]),
                        ("z", out.memory_shape)):   # z in the output's layout
        if name in values:
            values[name] = _host_array(name, values[name])
            check_shape(name, values[name], shape)
    mode = Activation.parse(values.get("activation")).mode
    blend = values.get("beta", 0.0) != 0
    if blend and prior is None:
        raise ValidationError(problem.direction.output, None, f"beta={values['beta']} blends the "
                              "output's prior contents: pass them")
    if not ({"scale", "bias", "z"} & set(values) or mode != "identity" or blend
            or values.get("alpha", 1.0) != 1):
        return problem, {}
    return problem.with_epilogue(Epilogue("scale" in values, "bias" in values, "z" in values,
                                          mode, blend)), values


def _solve(problem: Problem, handle: Handle | None, solver: str | None,
           host: Mapping[str, Tensor], policy: Mapping[str, Any],
           values: Mapping[str, Any] | None = None, prior: TensorLike | None = None,
           out: Any = None, weights: tuple[bool, int] = (False, 0)) -> Tensor:
    """Compute ``problem``'s output from the arrays in ``host`` (forward-sense names);
    ``policy`` holds max_tolerance and deterministic, as find and run take them; ``values`` the
    epilogue's (alpha, beta, ..., its arrays), ``prior`` the output's prior contents.  Given a
    pyopencl Array among them, the output is a pyopencl Array on the handle's queue, not waited
    for (its event is the call's last); else a host array: ``out``, written in place, or a new
    one (tensors.HostOutput: zero-copy where the device shares host memory).  ``weights`` is
    (constant_weights, weights_version)."""
    check_keywords(problem, *weights)
    out_name = problem.direction.output
    out_desc = getattr(problem, out_name)
    shape = out_desc.memory_shape   # the output array's
    if prior is not None:
        prior = _host_array(out_name, prior)
        check_shape(out_name, prior, shape)
    problem, values = _epilogue(problem, values or {}, prior)
    if solver is not None and not isinstance(solver, str):
        raise ValidationError("solver", solver, "expected a solver or family name, or None")
    blend = problem.epilogue is not None and problem.epilogue.blend
    arrays = {**host, **{name: values.pop(name) for name in ("scale", "bias", "z")
                         if name in values}}
    device = any(isinstance(a, cl_array.Array) for a in [prior, *arrays.values()])
    if out is not None:
        out = check_out(out, shape, device, list(arrays.values()))
    if problem.n == 0:  # nothing reaches OpenCL: empty outputs, and zero weight gradients
        empty = (values["beta"] * _on_host(prior)).astype(np.float32) if blend else np.zeros(
            shape, np.float32)
        if out is not None:
            out[...] = empty
            return out
        return _device_copy(check_handle(handle or default_handle()), out_name,
                            empty) if device else empty
    handle = check_handle(handle or default_handle())
    check_device_limits(handle, problem)
    # Any: mypy would hold the buffers' type to every keyword of find and run (**buffers)
    buffers: dict[str, Any] = {name: _buffer(handle, name, array)
                               for name, array in arrays.items()}
    target, output = None, None   # the output: a pyopencl Array given device inputs, else host
    if device:
        target = (_device_copy(handle, out_name, prior) if blend  # type: ignore[arg-type]
                  else cl_array.empty(handle.queue, shape, np.float32))
        buffers[out_name] = target.base_data
    else:
        output = HostOutput(handle, shape, out, prior if blend else None)
        buffers[out_name] = output.buffer
    tensors = Buffers(buffers.get("x"), buffers["w"], buffers.get("y"))
    if problem.epilogue is not None:
        parts = {name: buffers.get(name) for name in ("scale", "bias", "z")}
        tensors = tensors.with_epilogue_args(epilogue_args(problem, tensors, handle, **parts,
                                                           **values))
    constant, owner = weights[0], None   # with constant weights, the cache's key: w's object
    if constant:
        owner = (buffers["w"], weights[1]) if isinstance(arrays["w"], cl_array.Array) \
            else (arrays["w"], weights[1])
    _plan(handle, problem, solver, buffers, values, policy, constant).enqueue(
        tensors, None, owner)   # checked once
    if target is not None:
        target.add_event(cl.enqueue_marker(handle.queue))
        return target
    return output.read()  # type: ignore[union-attr]


def _plan(handle: Handle, problem: Problem, solver: str | None, buffers: Mapping[str, Any],
          values: Mapping[str, Any], policy: Mapping[str, Any], constant: bool = False) -> Plan:
    """The handle's plan for a numpy call: of ``solver``, or with None of find's choice, find
    running (on ``buffers``) only when the handle has no such plan yet; ``constant``: the
    weights are constant (find ranks with them so, from its own find-db key)."""
    if solver is not None:
        return plan(handle, problem, solver, **policy, constant_weights=constant)

    def found() -> Plan:
        if not constant and FindMode.parse() in (FindMode.HYBRID, FindMode.DYNAMIC_HYBRID):
            ranked = ranked_without_benchmark(handle, problem, Policy.resolve(**policy))
            if ranked and ranked[0].source in ("find-db", "predicted"):   # not a WTI guess
                return Plan(handle, problem, None, online=True, ranked=ranked, **policy)
        find(handle, problem, **buffers, **values, request_count=1, **policy,
             constant_weights=constant)
        return Plan(handle, problem, None, **policy, constant_weights=constant)
    return handle.kept_plan(("find", problem, *policy.values(), constant), found)


def _policy(max_tolerance: float | None, deterministic: bool | None) -> dict[str, Any]:
    return {"max_tolerance": max_tolerance, "deterministic": deterministic}


def conv2d(x: TensorLike, w: TensorLike, stride: IntPair = 1, padding: Padding = 0,
           dilation: IntPair = 1, groups: int = 1, *, bias: TensorLike | None = None,
           scale: TensorLike | None = None, z: TensorLike | None = None, alpha: float = 1.0,
           beta: float = 0.0, z_scale: float = 1.0, activation: ActivationLike = None,
           y: TensorLike | None = None, out: np.ndarray | None = None, solver: str | None = None,
           handle: Handle | None = None, max_tolerance: float | None = None,
           deterministic: bool | None = None, constant_weights: bool = False,
           weights_version: int = 0, layout: LayoutSpec = None) -> Tensor:
    """Forward convolution of NCHW ``x`` with KCRS ``w``, with its epilogue; returns

        act(alpha * conv(x, w) * scale[k] + bias[k] + z_scale * z) + beta * y

    ``padding`` is an int, (pad_h, pad_w) or ((top, bottom), (left, right)); ``stride`` and
    ``dilation`` an int or a pair.  ``bias`` and ``scale`` hold one float32 per output channel
    (fold_batch_norm makes them of an inference batch-norm), ``z`` and ``y`` (the prior output,
    read only when ``beta != 0``) the output's shape; ``activation`` is a name (``"relu"``,
    MIOpen's ``"LEAKYRELU"``, ...), a tuple (name, a, b, g) or a convsolve.Activation
    (docs/epilogues.md has the table).  ``solver=None`` follows the find mode; a solver name forces
    it.  ``max_tolerance`` and ``deterministic`` are the numerical policy (convsolve.find's);
    every function here takes them, and ``out``: a float32 host array of the output's shape that
    the result is written into and returned as (``out`` may be the prior output ``y``).
    Given pyopencl Arrays, the result is a pyopencl Array (README.md, "Using it").
    ``constant_weights=True`` (inference) promises that ``w`` (the same array object, host or
    device) keeps its contents until a call passes another ``weights_version`` (an int):
    solvers that transform or pack their weights then do it once per array and version, kept
    in the handle (conv_transpose2d takes the same keywords).  ``layout`` ("NHWC", or a
    mapping {"x": ..., "w": ..., "y": ...}; None: NCHW) is the arrays' memory order, every
    function here takes it, and their shapes follow it ((N, H, W, C) for NHWC); an epilogue
    serves every layout (``bias`` and ``scale`` per output channel, ``z`` and ``y`` in the
    output's layout), and every rank (conv1d, conv3d).
    """
    return _convolve(2, x, w, (stride, padding, dilation, groups), layout, solver, handle,
                     _policy(max_tolerance, deterministic), (constant_weights, weights_version),
                     out, {"bias": bias, "scale": scale, "z": z, "alpha": alpha, "beta": beta,
                           "z_scale": z_scale, "activation": activation}, y)


def _convolve(rank: int, x: TensorLike, w: TensorLike, conv: tuple, layout: LayoutSpec,
              solver: str | None, handle: Handle | None, policy: dict[str, Any],
              weights: tuple[bool, int], out: np.ndarray | None,
              values: dict[str, Any] | None = None, prior: TensorLike | None = None) -> Tensor:
    """The forward convolution of spatial rank ``rank`` (conv1d, conv2d, conv3d); ``conv`` is
    (stride, padding, dilation, groups)."""
    x, w = _host_array("x", x), _host_array("w", w)
    problem = _problem(rank, layout, x.shape, w.shape, *conv)
    return _solve(problem, handle, solver, {"x": x, "w": w}, policy, values, prior, out, weights)


def _gradient(rank: int, direction: Direction, dy: TensorLike, other: TensorLike, shape: Shape,
              conv: tuple, layout: LayoutSpec, values: dict[str, Any], prior: TensorLike | None,
              out: np.ndarray | None, solver: str | None, handle: Handle | None,
              policy: dict[str, Any]) -> Tensor:
    """The backward-data (``other`` is w, ``shape`` x's) or backward-weights (``other`` is x,
    ``shape`` w's) convolution of spatial rank ``rank``; ``conv`` as _convolve's."""
    data = direction is Direction.BACKWARD_DATA
    dy, other = _host_array("dy", dy), _host_array("w" if data else "x", other)
    shapes = (shape, other.shape) if data else (other.shape, shape)
    problem = _problem(rank, layout, *shapes, *conv, direction)
    check_shape("dy", dy, problem.y.memory_shape)
    return _solve(problem, handle, solver, {"y": dy, "w" if data else "x": other}, policy,
                  values, prior, out)


def conv2d_backward_data(dy: TensorLike, w: TensorLike, x_shape: Shape, stride: IntPair = 1,
                         padding: Padding = 0, dilation: IntPair = 1, groups: int = 1, *,
                         alpha: float = 1.0, beta: float = 0.0, dx: TensorLike | None = None,
                         out: np.ndarray | None = None, solver: str | None = None,
                         handle: Handle | None = None, max_tolerance: float | None = None,
                         deterministic: bool | None = None, layout: LayoutSpec = None) -> Tensor:
    """Gradient of the forward convolution with respect to its input, of shape ``x_shape``:
    alpha * dx + beta * the prior ``dx`` (read only when beta != 0)."""
    return _gradient(2, Direction.BACKWARD_DATA, dy, w, x_shape,
                     (stride, padding, dilation, groups), layout, {"alpha": alpha, "beta": beta},
                     dx, out, solver, handle, _policy(max_tolerance, deterministic))


def conv2d_backward_weights(dy: TensorLike, x: TensorLike, w_shape: Shape, stride: IntPair = 1,
                            padding: Padding = 0, dilation: IntPair = 1, groups: int = 1, *,
                            alpha: float = 1.0, beta: float = 0.0, dw: TensorLike | None = None,
                            out: np.ndarray | None = None, solver: str | None = None,
                            handle: Handle | None = None, max_tolerance: float | None = None,
                            deterministic: bool | None = None, layout: LayoutSpec = None) -> Tensor:
    """Gradient of the forward convolution with respect to its weights, of shape ``w_shape``:
    alpha * dw + beta * the prior ``dw`` (read only when beta != 0)."""
    return _gradient(2, Direction.BACKWARD_WEIGHTS, dy, x, w_shape,
                     (stride, padding, dilation, groups), layout, {"alpha": alpha, "beta": beta},
                     dw, out, solver, handle, _policy(max_tolerance, deterministic))


def conv2d_backward_bias(dy: TensorLike, alpha: float = 1.0, beta: float = 0.0,
                         db: TensorLike | None = None, *, out: np.ndarray | None = None,
                         handle: Handle | None = None) -> Tensor:
    """Gradient of a convolution's bias: alpha * dy summed over images and pixels + beta * the
    prior ``db`` (read only when beta != 0); deterministic, a tree reduction (bias_grad.py)."""
    dy = _host_array("dy", dy)
    if dy.ndim != 4:
        raise ValidationError("dy.shape", dy.shape, "expected (N, K, H, W)")
    alpha, beta = finite("alpha", alpha), finite("beta", beta)
    prior = None   # db's prior contents, given and read when beta != 0
    if beta != 0:
        if db is None:
            raise ValidationError("db", None, f"beta={beta} blends db's prior contents: pass them")
        prior = _host_array("db", db)
        check_shape("db", prior, dy.shape[1:2])
    device = isinstance(dy, cl_array.Array) or isinstance(prior, cl_array.Array)
    if out is not None:
        out = check_out(out, dy.shape[1:2], device, [dy])
    if dy.size == 0 or dy.shape[1] == 0:
        empty = ((beta * _on_host(prior)).astype(np.float32) if prior is not None
                 else np.zeros(dy.shape[1], np.float32))
        if out is not None:
            out[...] = empty
            return out
        return _device_copy(check_handle(handle or default_handle()), "db",
                            empty) if device else empty
    desc = dy_desc(dy.shape)
    handle = check_handle(handle or default_handle())
    check_tensors_fit(handle, {"dy": desc, "db": TensorDesc(desc.shape[1:2])})
    dy_buffer = _buffer(handle, "dy", dy)
    if device:
        target = (_device_copy(handle, "db", prior) if prior is not None
                  else cl_array.zeros(handle.queue, dy.shape[1:2], np.float32))
        backward_bias(handle, desc, dy=dy_buffer, db=target.base_data, alpha=alpha, beta=beta)
        target.add_event(cl.enqueue_marker(handle.queue))
        return target
    output = HostOutput(handle, dy.shape[1:2], out, prior)
    backward_bias(handle, desc, dy=dy_buffer, db=output.buffer, alpha=alpha, beta=beta)
    return output.read()


def conv_transpose2d(x: TensorLike, w: TensorLike, stride: IntPair = 1, padding: IntPair = 0,
                     output_padding: IntPair = 0, groups: int = 1, dilation: IntPair = 1, *,
                     out: np.ndarray | None = None, solver: str | None = None,
                     handle: Handle | None = None, max_tolerance: float | None = None,
                     deterministic: bool | None = None, constant_weights: bool = False,
                     weights_version: int = 0, layout: LayoutSpec = None) -> Tensor:
    """Transposed convolution of NCHW ``x`` with ``w`` of shape (C_in, C_out/groups, kH, kW), as
    PyTorch's conv_transpose2d; computed as the backward-data of the convolution it transposes
    (``layout``'s "x" is its input, "y" its output)."""
    return _transposed(2, x, w, stride, padding, output_padding, groups, dilation, layout, out,
                       solver, handle, _policy(max_tolerance, deterministic),
                       (constant_weights, weights_version))


def _transposed(rank: int, x: TensorLike, w: TensorLike, stride: IntPair, padding: IntPair,
                output_padding: IntPair, groups: int, dilation: IntPair, layout: LayoutSpec,
                out: np.ndarray | None, solver: str | None, handle: Handle | None,
                policy: dict[str, Any], weights: tuple[bool, int]) -> Tensor:
    """The transposed convolution of spatial rank ``rank`` (conv_transpose1d, 2d, 3d): the
    output rows and columns no input reaches (output_padding past the stride) set to zero."""
    x, w = _host_array("x", x), _host_array("w", w)
    layouts = tensor_layouts(layout, rank)
    reach, zeros = split_output_padding(output_padding, padding, stride, dilation, rank)
    problem = Problem.conv_transpose(_logical(x.shape, layouts["x"]),
                                     _logical(w.shape, layouts["w"]), stride, padding, reach,
                                     groups, dilation, layout=layouts, spatial_dims=rank)
    result = problem.x   # its output
    extra = [zeros[axis - 2] if axis >= 2 else 0 for axis in result.order]
    part = tuple(slice(0, size) for size in result.memory_shape)   # what the solver writes
    device = any(isinstance(a, cl_array.Array) for a in (x, w))
    if out is not None:
        check_out(out, [s + e for s, e in zip(result.memory_shape, extra)], device, [x, w])
        if any(zeros):
            out[...] = 0
    y = _solve(problem, handle, solver, {"y": x, "w": w}, policy,
               out=None if out is None else out[part], weights=weights)
    if not any(zeros) or out is not None:
        return out if out is not None else y
    if isinstance(y, cl_array.Array):
        if not problem.is_2d_nchw:
            raise ValidationError("output_padding", output_padding, "past the stride, on "
                                  "pyopencl Arrays, needs a 2-D NCHW problem: give host arrays")
        return pad_planes(y, zeros)
    return np.pad(y, [(0, e) for e in extra])


# {{{ 1-D and 3-D: conv2d's arguments, one size per spatial dim (PyTorch's conv1d, conv3d, ...)

def conv1d(x: TensorLike, w: TensorLike, stride: IntPair = 1, padding: Padding = 0,
           dilation: IntPair = 1, groups: int = 1, *, bias: TensorLike | None = None,
           scale: TensorLike | None = None, z: TensorLike | None = None, alpha: float = 1.0,
           beta: float = 0.0, z_scale: float = 1.0, activation: ActivationLike = None,
           y: TensorLike | None = None, layout: LayoutSpec = None,
           out: np.ndarray | None = None, solver: str | None = None,
           handle: Handle | None = None, max_tolerance: float | None = None,
           deterministic: bool | None = None, constant_weights: bool = False,
           weights_version: int = 0) -> Tensor:
    """Forward convolution of (N, C, W) ``x`` with (K, C/groups, S) ``w`` (``layout`` "NWC":
    (N, W, C) arrays), as conv2d, with its epilogue (bias and scale per output channel, z and y
    in the output's layout)."""
    return _convolve(1, x, w, (stride, padding, dilation, groups), layout, solver, handle,
                     _policy(max_tolerance, deterministic), (constant_weights, weights_version),
                     out, {"bias": bias, "scale": scale, "z": z, "alpha": alpha, "beta": beta,
                           "z_scale": z_scale, "activation": activation}, y)


def conv3d(x: TensorLike, w: TensorLike, stride: IntPair = 1, padding: Padding = 0,
           dilation: IntPair = 1, groups: int = 1, *, bias: TensorLike | None = None,
           scale: TensorLike | None = None, z: TensorLike | None = None, alpha: float = 1.0,
           beta: float = 0.0, z_scale: float = 1.0, activation: ActivationLike = None,
           y: TensorLike | None = None, layout: LayoutSpec = None,
           out: np.ndarray | None = None, solver: str | None = None,
           handle: Handle | None = None, max_tolerance: float | None = None,
           deterministic: bool | None = None, constant_weights: bool = False,
           weights_version: int = 0) -> Tensor:
    """Forward convolution of (N, C, D, H, W) ``x`` with (K, C/groups, Z, R, S) ``w``
    (``layout`` "NDHWC": (N, D, H, W, C) arrays), as conv2d, with its
    epilogue (bias and scale per output channel, z and y in the output's layout)."""
    return _convolve(3, x, w, (stride, padding, dilation, groups), layout, solver, handle,
                     _policy(max_tolerance, deterministic), (constant_weights, weights_version),
                     out, {"bias": bias, "scale": scale, "z": z, "alpha": alpha, "beta": beta,
                           "z_scale": z_scale, "activation": activation}, y)


def conv1d_backward_data(dy: TensorLike, w: TensorLike, x_shape: Shape, stride: IntPair = 1,
                         padding: Padding = 0, dilation: IntPair = 1, groups: int = 1, *,
                         layout: LayoutSpec = None, alpha: float = 1.0, beta: float = 0.0,
                         dx: TensorLike | None = None, out: np.ndarray | None = None,
                         solver: str | None = None, handle: Handle | None = None,
                         max_tolerance: float | None = None,
                         deterministic: bool | None = None) -> Tensor:
    """conv2d_backward_data of a 1-D convolution."""
    return _gradient(1, Direction.BACKWARD_DATA, dy, w, x_shape,
                     (stride, padding, dilation, groups), layout, {"alpha": alpha, "beta": beta},
                     dx, out, solver, handle, _policy(max_tolerance, deterministic))


def conv3d_backward_data(dy: TensorLike, w: TensorLike, x_shape: Shape, stride: IntPair = 1,
                         padding: Padding = 0, dilation: IntPair = 1, groups: int = 1, *,
                         layout: LayoutSpec = None, alpha: float = 1.0, beta: float = 0.0,
                         dx: TensorLike | None = None, out: np.ndarray | None = None,
                         solver: str | None = None, handle: Handle | None = None,
                         max_tolerance: float | None = None,
                         deterministic: bool | None = None) -> Tensor:
    """conv2d_backward_data of a 3-D convolution."""
    return _gradient(3, Direction.BACKWARD_DATA, dy, w, x_shape,
                     (stride, padding, dilation, groups), layout, {"alpha": alpha, "beta": beta},
                     dx, out, solver, handle, _policy(max_tolerance, deterministic))


def conv1d_backward_weights(dy: TensorLike, x: TensorLike, w_shape: Shape, stride: IntPair = 1,
                            padding: Padding = 0, dilation: IntPair = 1, groups: int = 1, *,
                            layout: LayoutSpec = None, alpha: float = 1.0, beta: float = 0.0,
                            dw: TensorLike | None = None, out: np.ndarray | None = None,
                            solver: str | None = None, handle: Handle | None = None,
                            max_tolerance: float | None = None,
                            deterministic: bool | None = None) -> Tensor:
    """conv2d_backward_weights of a 1-D convolution."""
    return _gradient(1, Direction.BACKWARD_WEIGHTS, dy, x, w_shape,
                     (stride, padding, dilation, groups), layout, {"alpha": alpha, "beta": beta},
                     dw, out, solver, handle, _policy(max_tolerance, deterministic))


def conv3d_backward_weights(dy: TensorLike, x: TensorLike, w_shape: Shape, stride: IntPair = 1,
                            padding: Padding = 0, dilation: IntPair = 1, groups: int = 1, *,
                            layout: LayoutSpec = None, alpha: float = 1.0, beta: float = 0.0,
                            dw: TensorLike | None = None, out: np.ndarray | None = None,
                            solver: str | None = None, handle: Handle | None = None,
                            max_tolerance: float | None = None,
                            deterministic: bool | None = None) -> Tensor:
    """conv2d_backward_weights of a 3-D convolution."""
    return _gradient(3, Direction.BACKWARD_WEIGHTS, dy, x, w_shape,
                     (stride, padding, dilation, groups), layout, {"alpha": alpha, "beta": beta},
                     dw, out, solver, handle, _policy(max_tolerance, deterministic))


def conv_transpose1d(x: TensorLike, w: TensorLike, stride: IntPair = 1, padding: IntPair = 0,
                     output_padding: IntPair = 0, groups: int = 1, dilation: IntPair = 1, *,
                     layout: LayoutSpec = None, out: np.ndarray | None = None,
                     solver: str | None = None, handle: Handle | None = None,
                     max_tolerance: float | None = None, deterministic: bool | None = None,
                     constant_weights: bool = False, weights_version: int = 0) -> Tensor:
    """conv_transpose2d of (N, C, W) ``x`` and (C_in, C_out/groups, kW) ``w``."""
    return _transposed(1, x, w, stride, padding, output_padding, groups, dilation, layout, out,
                       solver, handle, _policy(max_tolerance, deterministic),
                       (constant_weights, weights_version))


def conv_transpose3d(x: TensorLike, w: TensorLike, stride: IntPair = 1, padding: IntPair = 0,
                     output_padding: IntPair = 0, groups: int = 1, dilation: IntPair = 1, *,
                     layout: LayoutSpec = None, out: np.ndarray | None = None,
                     solver: str | None = None, handle: Handle | None = None,
                     max_tolerance: float | None = None, deterministic: bool | None = None,
                     constant_weights: bool = False, weights_version: int = 0) -> Tensor:
    """conv_transpose2d of (N, C, D, H, W) ``x`` and (C_in, C_out/groups, kD, kH, kW) ``w``."""
    return _transposed(3, x, w, stride, padding, output_padding, groups, dilation, layout, out,
                       solver, handle, _policy(max_tolerance, deterministic),
                       (constant_weights, weights_version))

# }}}


def applicable_solvers(problem: Problem, handle: Handle | None = None) -> list[str]:
    """Names of what find considers for ``problem``: the installed, enabled solvers applicable
    to it (with an epilogue, a fusing one also as ``<name>/unfused``), a 1-D problem's rank
    candidates (``<name>/2d``) and a channels-last problem's composites (``<name>/nchw``).

    With ``handle``, the errata for its device apply too (docs/environment.md); without one,
    only entries that name no device do.
    """
    device = None if handle is None else check_handle(handle).device.name
    return [solver.name for solver in candidates(check_problem(problem), None, device)[0]]
