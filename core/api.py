"""The numpy API: convolutions on host arrays, following the find mode or a named solver."""
import threading

import numpy as np
import pyopencl as cl

from .errors import ValidationError
from .execute import check_device_limits, check_handle, check_problem, run
from .find import find
from .handle import Handle
from .plugins import registry
from .problem import Direction, Problem, split_output_padding
from .tensors import read_output

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
    """``array`` as a C-contiguous float32 ndarray; other dtypes are refused, not cast."""
    try:
        array = np.asarray(array)
    except (ValueError, TypeError) as exc:   # ragged nested sequences, objects numpy refuses
        raise ValidationError(name, type(array).__name__, f"not an array: {exc}") from None
    if array.dtype != np.float32:
        raise ValidationError(f"{name}.dtype", str(array.dtype), "expected float32")
    return np.ascontiguousarray(array)


def _check_shape(name, array, shape):
    if array.shape != tuple(shape):
        raise ValidationError(f"{name}.shape", array.shape, f"the problem needs {tuple(shape)}")


def _solve(problem, handle, solver, host, policy):
    """Compute ``problem``'s output from the host arrays in ``host`` (forward-sense names);
    ``policy`` holds max_tolerance and deterministic, as find and run take them."""
    out_name = problem.direction.output
    out_desc = getattr(problem, out_name)
    if solver is not None and not isinstance(solver, str):
        raise ValidationError("solver", solver, "expected a solver or family name, or None")
    if problem.n == 0:  # nothing reaches OpenCL: empty outputs, and zero weight gradients
        return np.zeros(out_desc.shape, np.float32)
    handle = check_handle(handle or default_handle())
    check_device_limits(handle, problem)
    flags = cl.mem_flags
    buffers = {name: cl.Buffer(handle.context, flags.READ_ONLY | flags.COPY_HOST_PTR, hostbuf=array)
               for name, array in host.items()}
    buffers[out_name] = cl.Buffer(handle.context, flags.READ_WRITE, out_desc.nbytes)
    if solver is None:
        solver = find(handle, problem, **buffers, request_count=1, **policy)[0].solver
    run(handle, problem, solver, **buffers, **policy)
    return read_output(handle, problem, buffers)


def _policy(max_tolerance, deterministic):
    return {"max_tolerance": max_tolerance, "deterministic": deterministic}


def conv2d(x, w, stride=1, padding=0, dilation=1, groups=1, *, solver=None, handle=None,
           max_tolerance=None, deterministic=None):
    """Forward convolution of NCHW ``x`` with KCRS ``w``; returns y.

    ``padding`` is an int, (pad_h, pad_w) or ((top, bottom), (left, right)); ``stride`` and
    ``dilation`` an int or a pair.  ``solver=None`` follows the find mode; a solver name forces it.
    ``max_tolerance`` and ``deterministic`` are the numerical policy (convsolve.find's); every
    function here takes them.
    """
    x, w = _host_array("x", x), _host_array("w", w)
    problem = Problem.conv2d(x.shape, w.shape, stride, padding, dilation, groups)
    return _solve(problem, handle, solver, {"x": x, "w": w}, _policy(max_tolerance, deterministic))


def conv2d_backward_data(dy, w, x_shape, stride=1, padding=0, dilation=1, groups=1, *,
                         solver=None, handle=None, max_tolerance=None, deterministic=None):
    """Gradient of the forward convolution with respect to its input, of shape ``x_shape``."""
    dy, w = _host_array("dy", dy), _host_array("w", w)
    problem = Problem.conv2d(x_shape, w.shape, stride, padding, dilation, groups,
                             Direction.BACKWARD_DATA)
    _check_shape("dy", dy, problem.y.shape)
    return _solve(problem, handle, solver, {"y": dy, "w": w},
                  _policy(max_tolerance, deterministic))


def conv2d_backward_weights(dy, x, w_shape, stride=1, padding=0, dilation=1, groups=1, *,
                            solver=None, handle=None, max_tolerance=None, deterministic=None):
    """Gradient of the forward convolution with respect to its weights, of shape ``w_shape``."""
    dy, x = _host_array("dy", dy), _host_array("x", x)
    problem = Problem.conv2d(x.shape, w_shape, stride, padding, dilation, groups,
                             Direction.BACKWARD_WEIGHTS)
    _check_shape("dy", dy, problem.y.shape)
    return _solve(problem, handle, solver, {"x": x, "y": dy},
                  _policy(max_tolerance, deterministic))


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
