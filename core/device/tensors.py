"""A problem's tensors on host and device: random inputs, device copies and pyopencl arrays
checked for a call, the output read back."""
import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array

from ..errors import ValidationError


def random_tensors(problem, seed=0):
    """{'x', 'w', 'y'}: float32 host arrays of ``problem``'s shapes, uniform in [-1, 1].

    ``seed`` is an int or a numpy Generator (then drawn from, so successive calls differ).
    """
    rng = np.random.default_rng(seed)
    return {name: rng.uniform(-1, 1, getattr(problem, name).shape).astype(np.float32)
            for name in ("x", "w", "y")}


def random_epilogue_tensors(problem, seed=0):
    """The tensors of ``problem``'s epilogue parts ('scale', 'bias': one per output channel;
    'z': the output's shape), float32 host arrays uniform in [-1, 1]; {} without an epilogue."""
    structure, rng = problem.epilogue, np.random.default_rng(seed)
    if structure is None:
        return {}
    out = getattr(problem, problem.direction.output)
    shapes = {"scale": (out.shape[1],), "bias": (out.shape[1],), "z": out.shape}
    present = {"scale": structure.scale, "bias": structure.bias, "z": structure.residual}
    return {name: rng.uniform(-1, 1, shape).astype(np.float32)
            for name, shape in shapes.items() if present[name]}


def device_buffers(handle, host):
    """Read-write device copies of the host arrays (None for an empty one)."""
    flags = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
    return {name: cl.Buffer(handle.context, flags, hostbuf=array) if array.size else None
            for name, array in host.items()}


def read_tensor(handle, desc, buffer):
    """Host copy of a tensor described by ``desc`` from its device ``buffer`` (waits)."""
    out = np.empty(desc.shape, np.float32)
    if out.size:
        cl.enqueue_copy(handle.queue, out, buffer)
    return out


def read_output(handle, problem, buffers):
    """Host copy of the tensor ``problem``'s direction writes, from a dict of buffers."""
    name = problem.direction.output
    return read_tensor(handle, getattr(problem, name), buffers[name])


# {{{ pyopencl arrays

#: A tensor's device memory as find, run and plans take it: an OpenCL buffer or a pyopencl Array.
DeviceTensor = cl.Buffer | cl_array.Array


def is_device_array(value):
    """Whether ``value`` is a pyopencl.array.Array."""
    return isinstance(value, cl_array.Array)


def array_buffer(name, array, shape, handle=None):
    """The buffer of the pyopencl Array ``array`` given for tensor ``name`` of ``shape``, checked
    (float32, that shape, C-contiguous, at its buffer's start, given ``handle`` of its context);
    None for an empty one.  Given a handle, events still pending on the array from another queue
    (``array.events``) are waited for by the handle's queue (a barrier: the host does not wait).
    """
    if array.dtype != np.float32:
        raise ValidationError(f"{name}.dtype", str(array.dtype), "expected float32")
    if tuple(array.shape) != tuple(shape):
        raise ValidationError(f"{name}.shape", tuple(array.shape),
                              f"the problem needs {tuple(shape)}")
    if not array.flags.c_contiguous:
        raise ValidationError(f"{name}.strides", array.strides,
                              "expected a C-contiguous array (array.copy() makes one)")
    if array.offset:
        raise ValidationError(f"{name}.offset", array.offset, "expected an array at the start "
                              "of its buffer (array.copy() makes one)")
    if handle is not None and array.context != handle.context:
        raise ValidationError(name, "an array of another context",
                              f"make it on handle.queue ({handle.name})")
    if handle is not None and array.events and array.queue != handle.queue:
        cl.enqueue_barrier(handle.queue, wait_for=array.events)
    return array.base_data if array.size else None


def pad_planes(array, zeros):
    """A copy of the NCHW pyopencl Array ``array`` with ``zeros`` = (rows, columns) of zeros
    appended to the bottom and right of every plane, enqueued on the array's queue."""
    n, c, h, w = array.shape
    rows, cols = h + zeros[0], w + zeros[1]
    out = cl_array.zeros(array.queue, (n, c, rows, cols), np.float32)
    if array.size:
        out.add_event(cl.enqueue_copy(
            array.queue, out.base_data, array.base_data, src_origin=(0, 0, 0),
            dst_origin=(0, 0, 0), region=(4 * w, h, n * c), src_pitches=(4 * w, 4 * h * w),
            dst_pitches=(4 * cols, 4 * rows * cols), wait_for=array.events))
    return out

# }}}
