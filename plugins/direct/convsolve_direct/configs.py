"""What the direct family's solvers share: kernel files, config helpers, kernel arguments and
the fused epilogue."""
from importlib import resources

import numpy as np
import pyopencl as cl
from convsolve import tuning

KERNELS = resources.files(__package__) / "kernels"

#: Filter sizes that may be compiled into their own build (config FIXED = 1, -D FIL_H / FIL_W):
#: the tap loops unroll (3x3: most layers; 7x7: the ResNet stem).  Only these, so that a handful
#: of builds serve every problem.
SPECIALISED_FILTERS = ((3, 3), (7, 7))


#: Default FIXED = 1 only from this much work on (FLOPs, or output elements for bandwidth-bound
#: depthwise layers): below it the unrolled build costs more to compile (0.3-1 s on PoCL) than
#: it saves.
FIXED_MIN_FLOPS = 100e6
FIXED_MIN_OUTPUTS = 1 << 18


def fixed_default(problem, wanted):
    """The default FIXED: the device class's wish, for problems with enough work."""
    output = getattr(problem, problem.direction.output).size
    return int(bool(wanted) and (problem.flops >= FIXED_MIN_FLOPS
                                 or output >= FIXED_MIN_OUTPUTS))


def fixed_choices(problem):
    """The FIXED values a problem's config space offers: 1 only for SPECIALISED_FILTERS."""
    return (0, 1) if (problem.fil_h, problem.fil_w) in SPECIALISED_FILTERS else (0,)


def filter_defines(problem, config):
    """The -D defines that compile the filter size in when ``config`` asks for it."""
    if config.get("FIXED"):
        return {"FIL_H": problem.fil_h, "FIL_W": problem.fil_w}
    return {}


#: A problem extent at most this small joins the block-size candidates itself (3 channels: a
#: block of 3, not 2 + an overlapping 2); larger ones take listed sizes only, so that a few
#: builds serve many problems (blocks past the end are shifted back, see the kernels).
EXACT_BLOCK_LIMIT = 4


def capped(values, limit):
    """``values`` (sorted ints) cut to those <= ``limit``, with ``limit`` itself added when it
    is at most EXACT_BLOCK_LIMIT: block sizes that do not exceed a problem's extent."""
    kept = [v for v in values if v <= limit]
    if limit <= EXACT_BLOCK_LIMIT and limit not in kept:
        kept.append(limit)
    return tuple(sorted(kept)) or (values[0],)


def snapped(space, wanted):
    """``wanted`` (a device-class default) moved onto ``space``: each parameter to the largest
    candidate at most the wanted value (else the smallest candidate)."""
    config = {}
    for name, values in space.params.items():
        below = [v for v in values if v <= wanted[name]]
        config[name] = below[-1] if below else values[0]
    return config


def pick_default(table, handle, space, shrink):
    """The device class's entry of ``table`` snapped onto ``space``; while the result breaks a
    constraint, ``shrink(config)`` returns a smaller one (None: give up, take the space's first)."""
    config = snapped(space, tuning.pick(table, handle.device))
    while config is not None and space.refusal(config):
        config = shrink(config)
    return config if config is not None else next(iter(space))


def work_group_reasons(handle, size, local_bytes=0):
    """Why a work-group of ``size`` items using ``local_bytes`` of local memory cannot run."""
    device, reasons = handle.device, []
    if size > device.max_work_group_size:
        reasons.append(f"work-group of {size} > the device's {device.max_work_group_size}")
    if local_bytes > device.local_mem_size:
        reasons.append(f"{local_bytes} bytes of local memory > the device's "
                       f"{device.local_mem_size}")
    return reasons


def set_args(kernel, first, values):
    """Set ``values`` as ``kernel``'s arguments from index ``first`` on; the index after them."""
    for index, value in enumerate(values, start=first):
        kernel.set_arg(index, value)
    return first + len(values)


def set_sizes(kernel, first, problem, *extra):
    """Set the problem's sizes (CS_CONV_PARAMS) and then ``extra`` ints as ``kernel``'s arguments
    from index ``first`` on: once per build, so a call sets only its buffers (and the epilogue's
    values, which follow: the index returned)."""
    return set_args(kernel, first, (*problem.kernel_args(), *map(np.int32, extra)))


def enqueue(handle, kernel, global_size, local_size, *buffers, values=None, at=0):
    """Set ``buffers`` as the kernel's first arguments and ``values`` (an epilogue's
    convsolve.EpilogueArgs; None for a bare problem) from index ``at`` on (CS_EPI_ARGS), and
    enqueue it; returns the event."""
    set_args(kernel, 0, buffers)
    if values is not None:
        set_args(kernel, at, values.kernel_args())
    return cl.enqueue_nd_range_kernel(handle.queue, kernel, global_size, local_size)
