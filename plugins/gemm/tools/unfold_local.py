#!/usr/bin/env python3
"""Time the gemm family's im2col and col2im kernels at several work-group shapes (conv_layout's
LOCAL_SIZE), median of 7 profiled launches, on a few ResNet-50 layers at batch 8.

    python3 unfold_local.py            # on CONVSOLVE_DEVICE (the default device)
"""
import pyopencl as cl
from convsolve import Handle, Problem, ceil_div, round_up
from convsolve_gemm.conv_layout import Columns

LAYERS = [((8, 64, 56, 56), (64, 64, 3, 3), 1, 1), ((8, 256, 14, 14), (256, 256, 3, 3), 1, 1),
          ((8, 512, 28, 28), (1024, 512, 1, 1), 2, 0)]
SHAPES = [None, (1, 1, 1), (8, 1, 1), (1, 8, 1), (1, 16, 1)]


def median_ms(handle, kernel, size, local):
    size = size if local is None else tuple(map(round_up, size, local))
    cl.enqueue_nd_range_kernel(handle.queue, kernel, size, local).wait()
    times = []
    for _ in range(7):
        event = cl.enqueue_nd_range_kernel(handle.queue, kernel, size, local)
        event.wait()
        times.append((event.profile.end - event.profile.start) * 1e-6)
    return sorted(times)[3]


def main():
    handle = Handle(profiling=True)
    for x_shape, w_shape, stride, pad in LAYERS:
        p = Problem.conv2d(x_shape, w_shape, stride=stride, padding=pad)
        cols = Columns(handle, p)
        rows, ld = p.c * p.fil_h * p.fil_w, p.out_h * p.out_w
        x = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, p.x.nbytes)
        col = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, 4 * rows * ld * p.n)
        cols.im2col_kernel.set_args(x, col, *p.kernel_args(), 0, 0, ld, rows * ld, 0)
        cols.col2im_kernel.set_args(col, x, *p.kernel_args(), 0, ld, rows * ld, 0, 0)
        for name, kernel, size in (
                ("im2col", cols.im2col_kernel, (p.out_h * ceil_div(p.out_w, cols.im2col_tw),
                                                rows, p.n)),
                ("col2im", cols.col2im_kernel, (p.in_h * ceil_div(p.in_w, cols.col2im_tw),
                                                p.c, p.n))):
            times = ", ".join(f"{local}: {median_ms(handle, kernel, size, local):.3f} ms"
                              for local in SHAPES)
            print(f"{p.key()} {name}: {times}", flush=True)


if __name__ == "__main__":
    main()
