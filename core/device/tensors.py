"""A problem's tensors on host and device: random inputs, device copies and pyopencl arrays
checked for a call, the output read back."""
import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array

from .. import env
from ..errors import ValidationError


def random_tensors(problem, seed=0):
    """{'x', 'w', 'y'}: float32 host arrays of ``problem``'s tensors (in memory order:
    ``memory_shape``), uniform in [-1, 1].

    ``seed`` is an int or a numpy Generator (then drawn from, so successive calls differ).
    """
    rng = np.random.default_rng(seed)
    return {name: rng.uniform(-1, 1, getattr(problem, name).memory_shape).astype(np.float32)
            for name in ("x", "w", "y")}


def random_epilogue_tensors(problem, seed=0):
    """The tensors of ``problem``'s epilogue parts ('scale', 'bias': one per output channel;
    'z': the output's, in its layout), float32 host arrays uniform in [-1, 1]; {} without an
    epilogue."""
    structure, rng = problem.epilogue, np.random.default_rng(seed)
    if structure is None:
        return {}
    out = getattr(problem, problem.direction.output)
    shapes = {"scale": (out.shape[1],), "bias": (out.shape[1],), "z": out.memory_shape}
    present = {"scale": structure.scale, "bias": structure.bias, "z": structure.residual}
    return {name: rng.uniform(-1, 1, shape).astype(np.float32)
            for name, shape in shapes.items() if present[name]}


def device_buffers(handle, host):
    """Read-write device copies of the host arrays (None for an empty one)."""
    flags = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
    return {name: cl.Buffer(handle.context, flags, hostbuf=array) if array.size else None
            for name, array in host.items()}


# {{{ host arrays: wrapped where the device shares host memory, else copied

#: Host arrays are wrapped only at addresses that are multiples of this many bytes: float16, the
#: widest vector a float32 kernel may load through a pointer, is 64 bytes.  PoCL wraps any
#: address, and the shipped kernels (vloadn) ran as fast on 16-byte aligned wrapped arrays
#: (ResNet-50 layers 0-4 at batch 8: copy / wrap 1.03-2.19 at 16 bytes, 1.40-2.25 at 64), but a
#: plugin's kernel taking float16 pointers would fault on them.  Wrapping was never slower than
#: copying, measured (scripts/zero_copy.py): even below 1 MB (MobileNet-v2 at batch 1,
#: 0.96-1.05), 1.3-1.7x faster above.
WRAP_ALIGN = 64


def wraps(handle, array):
    """Whether the host ``array`` is wrapped (USE_HOST_PTR) rather than copied: the device shares
    host memory, CONVSOLVE_ZERO_COPY allows it, and the array is non-empty, float32,
    C-contiguous and 64-byte aligned (WRAP_ALIGN)."""
    return bool(array.size and array.dtype == np.float32 and array.flags.c_contiguous
                and array.ctypes.data % WRAP_ALIGN == 0 and handle.device.host_unified_memory
                and env.flag(env.ZERO_COPY))


def aligned_empty(shape):
    """An uninitialised float32 host array of ``shape`` at a WRAP_ALIGN-aligned address."""
    size = int(np.prod(shape))
    raw = np.empty(size + WRAP_ALIGN // 4, np.float32)
    start = (-raw.ctypes.data % WRAP_ALIGN) // 4
    return raw[start:start + size].reshape(shape)


def host_buffer(handle, array):
    """A read-only device buffer holding the host ``array``: the array itself where wraps()
    (no copy: the caller keeps it unchanged until the call's kernels are done), else a copy (a
    view made C-contiguous first)."""
    flags = cl.mem_flags
    if wraps(handle, array):
        return cl.Buffer(handle.context, flags.READ_ONLY | flags.USE_HOST_PTR, hostbuf=array)
    return cl.Buffer(handle.context, flags.READ_ONLY | flags.COPY_HOST_PTR,
                     hostbuf=np.ascontiguousarray(array))


class HostOutput:
    """The host array a call returns and the device buffer its kernels write: ``out`` (else a
    new aligned array) wrapped where wraps() allows, else a device buffer read back into it.
    ``prior`` (the output's prior contents, for beta) is copied in first unless it is ``out``.
    """

    def __init__(self, handle, shape, out=None, prior=None):
        self.queue, flags = handle.queue, cl.mem_flags
        if out is None:
            out = aligned_empty(shape)
        if prior is not None and not (out.ctypes.data == prior.ctypes.data
                                      and out.strides == prior.strides):
            np.copyto(out, prior)
        self.array, self.wrapped = out, wraps(handle, out)
        if self.wrapped:
            self.buffer = cl.Buffer(handle.context, flags.READ_WRITE | flags.USE_HOST_PTR,
                                    hostbuf=out)
        elif prior is not None:
            self.buffer = cl.Buffer(handle.context, flags.READ_WRITE | flags.COPY_HOST_PTR,
                                    hostbuf=np.ascontiguousarray(out))
        else:
            self.buffer = cl.Buffer(handle.context, flags.READ_WRITE, out.nbytes)

    def read(self):
        """The output array once the queue's kernels are done (waits): a wrapped array mapped
        and unmapped (which makes the device's writes visible), else a copy read back."""
        if self.wrapped:
            mapped, _ = cl.enqueue_map_buffer(self.queue, self.buffer, cl.map_flags.READ, 0,
                                              self.array.shape, np.float32)
            mapped.base.release(self.queue)
        elif self.array.flags.c_contiguous:
            cl.enqueue_copy(self.queue, self.array, self.buffer)
        else:
            dense = np.empty(self.array.shape, np.float32)
            cl.enqueue_copy(self.queue, dense, self.buffer)
            self.array[...] = dense
        return self.array


def check_shape(name, array, shape):
    """ValidationError naming ``name``.shape unless ``array`` (the numpy API's) has ``shape``."""
    if tuple(array.shape) != tuple(shape):
        raise ValidationError(f"{name}.shape", array.shape, f"the problem needs {tuple(shape)}")


#: Why another dtype is refused, and the way to float32.
FLOAT32_ONLY = ("expected float32: convsolve computes in float32; .astype(numpy.float32) "
                "makes a float32 copy (results then carry float32's rounding)")


def check_out(out, shape, device, inputs):
    """``out`` checked to take the output: a writeable float32 host array of ``shape`` sharing
    no memory with ``inputs`` (the output's prior contents may be ``out`` itself)."""
    if device:
        raise ValidationError("out", type(out).__name__, "with pyopencl Arrays the result is a "
                              "new Array: out= takes host arrays")
    if not isinstance(out, np.ndarray):
        raise ValidationError("out", type(out).__name__, "expected a numpy array")
    if out.dtype != np.float32:
        raise ValidationError("out.dtype", str(out.dtype), FLOAT32_ONLY)
    check_shape("out", out, shape)
    if not out.flags.writeable:
        raise ValidationError("out", "a read-only array", "expected a writeable array")
    if any(np.may_share_memory(out, array) for array in inputs):
        raise ValidationError("out", "an input's memory", "give the output memory of its own")
    return out

# }}}


def read_tensor(handle, desc, buffer):
    """Host copy of a tensor described by ``desc`` from its device ``buffer`` (waits), in its
    memory order."""
    out = np.empty(desc.memory_shape, np.float32)
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
