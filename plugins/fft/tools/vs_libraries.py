"""The plugin's batched 2-D real FFT (fft2d_forward.cl) against pyvkfft (VkFFT's OpenCL backend) and
reikna, on the same device and planes: forward real-to-complex transforms of `batch` planes.

Needs pyvkfft and reikna (not the plugin's dependencies), e.g. installed in a separate venv whose
packages are put on PYTHONPATH after convsolve's:
    VKFFT_BACKEND=opencl pip install pyopencl pyvkfft reikna    # needs Debian's opencl-headers
    python plugins/fft/tools/vs_libraries.py 1536x30x30 2048x32x32 512x60x60 64x120x120
"""
import sys
import time
from pathlib import Path

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

KERNELS = Path(__file__).resolve().parents[1] / "convsolve_fft" / "kernels"
CORE = Path(__file__).resolve().parents[3] / "core" / "kernels"
from convsolve_fft.transforms import local_bytes, plan_record, spectrum_size


def best_ms(run, rounds=10):
    run()
    best = 1e30
    for _ in range(rounds):
        t0 = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def ours(ctx, queue, x):
    batch, fh, fw = x.shape
    twiddles = []
    plans = np.concatenate([plan_record(fh // 2, twiddles, True), plan_record(fw, twiddles)])
    tw = np.array(twiddles)
    tw = np.stack([tw.real, tw.imag], 1).astype(np.float32)
    fp = spectrum_size(fh, fw)[1]
    axis = [(0, fh, 0, 0, 1, 0, 0, 1, fh), (0, fw, 0, 0, 1, 0, 0, 1, fw)]
    record = np.array([1, batch, 1, 1, 1, 1, 0, fh * fw, 0, 1, 0, 0, 0, 0, batch, x.size]
                      + list(axis[0]) + list(axis[1]), np.int32)
    flags = cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR
    bufs = [cl.Buffer(ctx, flags, hostbuf=a) for a in (x, record, plans, tw)]
    out = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, batch * 2 * fp * 4)
    program = cl.Program(ctx, (KERNELS / "fft2d_forward.cl").read_text()).build(
        options=["-DLANES=16", "-DWG=1", f"-I{KERNELS}", f"-I{CORE}"])
    kernel = program.fft2d_forward
    kernel.set_args(bufs[0], np.int32(0), out, np.int32(0), bufs[1], bufs[2], bufs[3],
                    np.int32(fp), cl.LocalMemory(local_bytes(fh, fw, 16)))
    keep = (bufs, out, program)   # the kernel does not hold its arguments alive

    def run():
        cl.enqueue_nd_range_kernel(queue, kernel, (batch,), (1,)).wait()
        return keep
    return run


def vkfft(ctx, queue, x):
    from pyvkfft.opencl import VkFFTApp
    batch, fh, fw = x.shape
    src = cla.to_device(queue, x)
    dst = cla.empty(queue, (batch, fh, fw // 2 + 1), np.complex64)
    app = VkFFTApp(x.shape, np.float32, queue, ndim=2, r2c=True, inplace=False)
    return lambda: (app.fft(src, dst), queue.finish())


def reikna(ctx, queue, x):
    from reikna.cluda import ocl_api
    from reikna.fft import FFT
    api = ocl_api()
    thread = api.Thread(queue)
    data = thread.to_device(x.astype(np.complex64))
    fft = FFT(data, axes=(1, 2)).compile(thread)
    return lambda: (fft(data, data), thread.synchronize())


def main():
    platform = next(p for p in cl.get_platforms() if "Portable" in p.name)
    ctx = cl.Context(platform.get_devices())
    queue = cl.CommandQueue(ctx)
    print(f"device: {ctx.devices[0].name}")
    print("| planes | ours (ms) | pyvkfft r2c (ms) | reikna c2c (ms) |")
    print("| --- | --- | --- | --- |")
    for spec in sys.argv[1:] or ["1536x30x30", "2048x32x32", "512x60x60", "64x120x120"]:
        batch, fh, fw = map(int, spec.split("x"))
        x = np.random.default_rng(0).uniform(-1, 1, (batch, fh, fw)).astype(np.float32)
        cells = []
        for name in (ours, vkfft, reikna):
            try:
                cells.append(f"{best_ms(name(ctx, queue, x)):.2f}")
            except Exception as exc:  # noqa: BLE001 - a library that fails is reported as such
                cells.append(f"failed: {type(exc).__name__}: {str(exc)[:60]}")
        print(f"| {spec} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
