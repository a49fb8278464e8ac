"""A problem's tensors on host and device: random inputs, device copies, the output read back."""
import numpy as np
import pyopencl as cl


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
