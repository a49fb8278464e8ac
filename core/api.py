"""The numpy API: convolutions on host arrays, following the find mode or a named solver."""
import threading

import numpy as np
import pyopencl as cl

from .device.handle import Handle
from .device.tensors import read_output
from .engine.bias_grad import backward_bias, dy_desc
from .engine.find import find
from .engine.run import check_device_limits, check_handle, check_problem, check_tensors_fit, run
from .epilogue import Activation, Epilogue, finite
from .errors import ValidationError
from .problem import Direction, Problem, TensorDesc, split_output_padding
from .solvers.registry import registry

_default_handle = None
_default_lock = threading.Lock()


def default_handle():
    """The process's shared Handle on the default device (CONVSOLVE_DEVICE), made on first use."""
    global _default_handle
    with _default_lock:
        if _default_handle is None:
            _default_handle = Handle()
        return _default_handle


def _host_array(name, array):
    """``array`` as a float32 ndarray, other dtypes refused, not cast; a view stays a view, so
    that shapes and sizes are checked before anything is copied (_buffer copies)."""
    try:
        array = np.asarray(array)
    except (ValueError, TypeError) as exc:   # ragged nested sequences, objects numpy refuses
        raise ValidationError(name, type(array).__name__, f"not an array: {exc}") from None
    if array.dtype != np.float32:
        raise ValidationError(f"{name}.dtype", str(array.dtype), "expected float32")
    return array


def _buffer(handle, flags, array):
    """A device buffer with ``array``'s contents (made C-contiguous first, a copy for a view)."""
    return cl.Buffer(handle.context, flags | cl.mem_flags.COPY_HOST_PTR,
                     hostbuf=np.ascontiguousarray(array))


def _check_shape(name, array, shape):
    if array.shape != tuple(shape):
        raise ValidationError(f"{name}.shape", array.shape, f"the problem needs {tuple(shape)}")


def _epilogue(problem, values, prior):
    """``problem`` with the epilogue the numpy arguments ``values`` ask for (None when they are
    the defaults: the bare convolution), and ``values`` with their host arrays checked;
    ``prior`` is the output's prior contents (needed when beta != 0)."""
    values = {name: value for name, value in values.items() if value is not None}
    for name in ("alpha", "beta", "z_scale"):
        if name in values:
            values[name] = finite(name, values[name])
    out = getattr(problem, problem.direction.output)
    for name, shape in (("scale", out.shape[1:2]), ("bias", out.shape[1:2]), ("z", out.shape)):
        if name in values:
            values[name] = _host_array(name, values[name])
            _check_shape(name, values[name], shape)
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


def _solve(problem, handle, solver, host, policy, values=None, prior=None):
    """Compute ``problem``'s output from the host arrays in ``host`` (forward-sense names);
    ``policy`` holds max_tolerance and deterministic, as find and run take them; ``values`` the
    epilogue's (alpha, beta, ..., its arrays), ``prior`` the output's prior contents."""
    out_name = problem.direction.output
    out_desc = getattr(problem, out_name)
    if prior is not None:
        prior = _host_array(out_name, prior)
        _check_shape(out_name, prior, out_desc.shape)
    problem, values = _epilogue(problem, values or {}, prior)
    if solver is not None and not isinstance(solver, str):
        raise ValidationError("solver", solver, "expected a solver or family name, or None")
    blend = problem.epilogue is not None and problem.epilogue.blend
    if problem.n == 0:  # nothing reaches OpenCL: empty outputs, and zero weight gradients
        return (values["beta"] * prior).astype(np.float32) if blend else np.zeros(
            out_desc.shape, np.float32)
    handle = check_handle(handle or default_handle())
    check_device_limits(handle, problem)
    flags = cl.mem_flags
    arrays = {**host, **{name: values.pop(name) for name in ("scale", "bias", "z")
                         if name in values}}
    buffers = {name: _buffer(handle, flags.READ_ONLY, array) for name, array in arrays.items()}
    buffers[out_name] = (_buffer(handle, flags.READ_WRITE, prior) if blend else
                         cl.Buffer(handle.context, flags.READ_WRITE, out_desc.nbytes))
    if solver is None:
        solver = find(handle, problem, **buffers, **values, request_count=1, **policy)[0].solver
    run(handle, problem, solver, **buffers, **values, **policy)
    return read_output(handle, problem, buffers)


def _policy(max_tolerance, deterministic):
    return {"max_tolerance": max_tolerance, "deterministic": deterministic}


def conv2d(x, w, stride=1, padding=0, dilation=1, groups=1, *, bias=None, scale=None, z=None,
           alpha=1.0, beta=0.0, z_scale=1.0, activation=None, y=None, solver=None, handle=None,
           max_tolerance=None, deterministic=None):
    """Forward convolution of NCHW ``x`` with KCRS ``w``, with its epilogue; returns

        act(alpha * conv(x, w) * scale[k] + bias[k] + z_scale * z) + beta * y

    ``padding`` is an int, (pad_h, pad_w) or ((top, bottom), (left, right)); ``stride`` and
    ``dilation`` an int or a pair.  ``bias`` and ``scale`` hold one float32 per output channel
    (fold_batch_norm makes them of an inference batch-norm), ``z`` and ``y`` (the prior output,
    read only when ``beta != 0``) the output's shape; ``activation`` is a name (``"relu"``,
    MIOpen's ``"LEAKYRELU"``, ...), a tuple (name, a, b, g) or a convsolve.Activation
    (docs/epilogues.md has the table).  ``solver=None`` follows the find mode; a solver name forces
    it.  ``max_tolerance`` and ``deterministic`` are the numerical policy (convsolve.find's);
    every function here takes them.
    """
    x, w = _host_array("x", x), _host_array("w", w)
    problem = Problem.conv2d(x.shape, w.shape, stride, padding, dilation, groups)
    values = {"bias": bias, "scale": scale, "z": z, "alpha": alpha, "beta": beta,
              "z_scale": z_scale, "activation": activation}
    return _solve(problem, handle, solver, {"x": x, "w": w}, _policy(max_tolerance, deterministic),
                  values, y)


def conv2d_backward_data(dy, w, x_shape, stride=1, padding=0, dilation=1, groups=1, *,
                         alpha=1.0, beta=0.0, dx=None, solver=None, handle=None,
                         max_tolerance=None, deterministic=None):
    """Gradient of the forward convolution with respect to its input, of shape ``x_shape``:
    alpha * dx + beta * the prior ``dx`` (read only when beta != 0)."""
    dy, w = _host_array("dy", dy), _host_array("w", w)
    problem = Problem.conv2d(x_shape, w.shape, stride, padding, dilation, groups,
                             Direction.BACKWARD_DATA)
    _check_shape("dy", dy, problem.y.shape)
    return _solve(problem, handle, solver, {"y": dy, "w": w},
                  _policy(max_tolerance, deterministic), {"alpha": alpha, "beta": beta}, dx)


def conv2d_backward_weights(dy, x, w_shape, stride=1, padding=0, dilation=1, groups=1, *,
                            alpha=1.0, beta=0.0, dw=None, solver=None, handle=None,
                            max_tolerance=None, deterministic=None):
    """Gradient of the forward convolution with respect to its weights, of shape ``w_shape``:
    alpha * dw + beta * the prior ``dw`` (read only when beta != 0)."""
    dy, x = _host_array("dy", dy), _host_array("x", x)
    problem = Problem.conv2d(x.shape, w_shape, stride, padding, dilation, groups,
                             Direction.BACKWARD_WEIGHTS)
    _check_shape("dy", dy, problem.y.shape)
    return _solve(problem, handle, solver, {"x": x, "y": dy},
                  _policy(max_tolerance, deterministic), {"alpha": alpha, "beta": beta}, dw)


def conv2d_backward_bias(dy, alpha=1.0, beta=0.0, db=None, *, handle=None):
    """Gradient of a convolution's bias: alpha * dy summed over images and pixels + beta * the
    prior ``db`` (read only when beta != 0); deterministic, a tree reduction (bias_grad.py)."""
    dy = _host_array("dy", dy)
    if dy.ndim != 4:
        raise ValidationError("dy.shape", dy.shape, "expected (N, K, H, W)")
    alpha, beta = finite("alpha", alpha), finite("beta", beta)
    if beta != 0:
        if db is None:
            raise ValidationError("db", None, f"beta={beta} blends db's prior contents: pass them")
        db = _host_array("db", db)
        _check_shape("db", db, dy.shape[1:2])
    if dy.size == 0 or dy.shape[1] == 0:
        return (beta * db).astype(np.float32) if beta != 0 else np.zeros(dy.shape[1], np.float32)
    desc = dy_desc(dy.shape)
    handle = check_handle(handle or default_handle())
    check_tensors_fit(handle, {"dy": desc, "db": TensorDesc(desc.shape[1:2])})
    flags = cl.mem_flags
    dy_buffer = _buffer(handle, flags.READ_ONLY, dy)
    out = db.copy() if beta != 0 else np.zeros(dy.shape[1], np.float32)
    db_buffer = _buffer(handle, flags.READ_WRITE, out)
    backward_bias(handle, desc, dy=dy_buffer, db=db_buffer, alpha=alpha, beta=beta)
    cl.enqueue_copy(handle.queue, out, db_buffer)
    return out


def conv_transpose2d(x, w, stride=1, padding=0, output_padding=0, groups=1, dilation=1, *,
                     solver=None, handle=None, max_tolerance=None, deterministic=None):
    """Transposed convolution of NCHW ``x`` with ``w`` of shape (C_in, C_out/groups, kH, kW), as
    PyTorch's conv_transpose2d; computed as the backward-data of the convolution it transposes."""
    x, w = _host_array("x", x), _host_array("w", w)
    reach, zeros = split_output_padding(output_padding, padding, stride, dilation)
    problem = Problem.conv_transpose2d(x.shape, w.shape, stride, padding, reach, groups, dilation)
    y = _solve(problem, handle, solver, {"y": x, "w": w}, _policy(max_tolerance, deterministic))
    return np.pad(y, ((0, 0), (0, 0), (0, zeros[0]), (0, zeros[1]))) if any(zeros) else y


def applicable_solvers(problem, handle=None):
    """Names of the installed, enabled solvers applicable to ``problem``.

    ``handle`` is accepted for symmetry with the rest of the API; applicability does not depend
    on the device in solver API 2.0.
    """
    del handle
    return [solver.name for solver in registry().candidates(check_problem(problem))[0]]
