"""Measured device peak for `convsolve bench`: float32 FMA GFLOP/s and copy GB/s, from peak.cl."""
from importlib import resources

import numpy as np
import pyopencl as cl

from ..device.handle import is_gpu
from ..device.timing import elapsed_ms

PEAK_SOURCE = resources.files("convsolve.bench") / "kernels" / "peak.cl"
#: (vector width, independent chains) tried on a GPU; the fastest counts.
GPU_FMA_CONFIGS = ((1, 8), (2, 8), (4, 8))
COPY_WIDTHS = (4, 8, 16)
SAMPLES = 3


def fma_configs(device):
    """(vector width, chains) pairs to try: explicit wide vectors on a CPU (PoCL's own vectoriser
    stops at 256 bits) of the preferred width; scalar and short vectors on a GPU."""
    if is_gpu(device):
        return GPU_FMA_CONFIGS
    width = min(16, max(4, device.preferred_vector_width_float))
    return ((width, 8), (width, 12))


def fma_flops(work_items, width, chains, iters):
    """Floating-point operations of one cs_peak_fma launch (an FMA counts 2)."""
    return 2 * work_items * width * chains * iters


def copy_bytes(elements):
    """Bytes one cs_peak_copy over ``elements`` floats moves: each is read once and written once."""
    return 2 * 4 * elements


def rate(amount, time_ms):
    """``amount`` per second in units of 1e9 (GFLOP/s or GB/s) for a time in ms."""
    return amount / (time_ms * 1e6) if time_ms > 0 else 0.0


def _fma_rate(handle, width, chains, target_ms):
    """Best GFLOP/s of SAMPLES launches of one FMA configuration, its iterations calibrated."""
    kernel = handle.build(PEAK_SOURCE, "cs_peak_fma", {"PEAK_VW": width, "PEAK_CHAINS": chains})
    dev = handle.device
    work_items = dev.max_compute_units * (2048 if handle.is_gpu else 64)
    local = 256 if handle.is_gpu else None
    out = cl.Buffer(handle.context, cl.mem_flags.WRITE_ONLY, 4 * width * work_items)

    def launch(iters):
        kernel.set_args(out, np.int32(iters), np.float32(1.0))
        return elapsed_ms([cl.enqueue_nd_range_kernel(handle.queue, kernel, (work_items,),
                                                      None if local is None else (local,))])
    iters = 64
    launch(iters)  # code generation happens at the first enqueue on PoCL
    while iters < 1 << 24:
        took = launch(iters)
        if took >= target_ms / 4:
            iters = int(iters * target_ms / max(took, 1e-3))
            break
        iters *= 8
    iters = max(1, min(iters, 1 << 26))
    best = max(rate(fma_flops(work_items, width, chains, iters), launch(iters))
               for _ in range(SAMPLES))
    return best


def _copy_rate(handle, width, elements):
    """Best GB/s of SAMPLES copies of ``elements`` floats as float``width`` vectors."""
    kernel = handle.build(PEAK_SOURCE, "cs_peak_copy", {"COPY_VW": width})
    src = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, 4 * elements)
    dst = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, 4 * elements)
    cl.enqueue_fill_buffer(handle.queue, src, np.float32(1.0), 0, 4 * elements)
    kernel.set_args(src, dst)
    shape = (elements // width,)

    def launch():
        return elapsed_ms([cl.enqueue_nd_range_kernel(handle.queue, kernel, shape, None)])
    launch()
    best = max(rate(copy_bytes(elements), launch()) for _ in range(SAMPLES))
    src.release()
    dst.release()
    return best


def measure_peak(handle, target_ms=None):
    """{'gflops', 'gbps', 'fma', 'copy', 'how'}: the best FMA and copy rates over the tried configs.

    Each configuration's figure is the best of SAMPLES launches of about ``target_ms`` (50 ms on
    a CPU, 20 ms on a GPU): the peak is what the device can do, so noise from other processes on a
    shared machine is excluded by taking the maximum, not the median.  The launches run on
    ``handle``'s profiling queue (Handle.timing).
    """
    handle = handle.timing
    target_ms = target_ms or (20.0 if handle.is_gpu else 50.0)
    fma = {(w, c): _fma_rate(handle, w, c, target_ms) for w, c in fma_configs(handle.device)}
    (width, chains), gflops = max(fma.items(), key=lambda item: item[1])
    limit = handle.device.max_mem_alloc_size // 4
    elements = min(limit, (256 if handle.is_gpu else 16) << 20)  # floats: 1 GiB on a GPU, 64 MiB on a CPU
    elements -= elements % 16
    copy = {w: _copy_rate(handle, w, elements) for w in COPY_WIDTHS}
    copy_width, gbps = max(copy.items(), key=lambda item: item[1])
    return {"gflops": gflops, "gbps": gbps,
            "fma": {"PEAK_VW": width, "PEAK_CHAINS": chains,
                    "all": {f"{w}x{c}": round(g, 1) for (w, c), g in fma.items()}},
            "copy": {"COPY_VW": copy_width, "bytes": copy_bytes(elements),
                     "all": {str(w): round(g, 1) for w, g in copy.items()}},
            "how": f"measured: float{width} x {chains} chains, best of {SAMPLES}"}
