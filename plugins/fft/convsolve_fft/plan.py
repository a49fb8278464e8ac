"""A problem's FFT convolution as kernel launches: the plane sets on the device, the transforms
and products per chunk of images, the invoker."""
import numpy as np
import pyopencl as cl

from .layout import BWD, FWD, WRW, upload
from .products import ComplexGemm
from .transforms import SMALL_KH, SMALL_TAPS, Transform


def small_weights(layout):
    """Whether the weights' spectra come from the dft_small kernels (a support of SMALL_TAPS
    squared)."""
    return (max(layout.h.taps, layout.w.taps) <= SMALL_TAPS
            and layout.h.length // 2 + 1 <= SMALL_KH)


def build(problem, handle, layout, config):
    """The invoker: weights' spectra, then per chunk the inputs' spectra, their product and the
    inverse transform of the output (backward-weights: inverted once, after every chunk)."""
    p, lay, direction = problem, layout, problem.direction
    fft = Transform(handle, lay.h.length, lay.w.length, config)
    gemm = ComplexGemm(handle, lay, config)
    weights = upload(handle, lay.weight_planes({FWD: "w", BWD: "w_flip", WRW: "dw"}[direction]))
    roles = {FWD: (("x", p.c), ("y", p.k)), BWD: (("dy_bwd", p.k), ("dx", p.c)),
             WRW: (("x", p.c), ("dy", p.k))}[direction]
    sets = {}
    for _, images in lay.chunks():
        if images not in sets:
            sets[images] = [upload(handle, lay.image_planes(images, channels, role))
                            for role, channels in roles]
    x_image, y_image = p.c * p.in_h * p.in_w, p.k * p.out_h * p.out_w
    small = small_weights(lay)     # the dft_small kernels' separable DFTs for the weights
    weights_forward = fft.small_forward if small else fft.forward
    weights_inverse = fft.small_inverse if small else fft.inverse
    uncovered = direction is BWD and (lay.h.step > 1 or lay.h.phases < lay.h.stride
                                      or lay.w.step > 1 or lay.w.phases < lay.w.stride)

    def invoker(buffers, scratch):
        events = []
        if uncovered:   # dx elements no phase reaches are zero
            events.append(cl.enqueue_fill_buffer(handle.queue, buffers.x, np.float32(0), 0,
                                                 p.x.nbytes))
        if direction is not WRW:
            events.append(weights_forward(buffers.w, 0, scratch, lay.weights, weights))
        for n0, images in lay.chunks():
            first, second = sets[images]
            columns = images * lay.tiles
            if direction is FWD:
                events.append(fft.forward(buffers.x, n0 * x_image, scratch, lay.x_spectra, first))
                events.append(gemm(scratch, columns))
                events.append(fft.inverse(scratch, lay.dy_spectra, buffers.y, n0 * y_image,
                                          second))
            elif direction is BWD:
                events.append(fft.forward(buffers.y, n0 * y_image, scratch, lay.dy_spectra,
                                          first))
                events.append(gemm(scratch, columns))
                events.append(fft.inverse(scratch, lay.x_spectra, buffers.x, n0 * x_image,
                                          second))
            else:
                events.append(fft.forward(buffers.x, n0 * x_image, scratch, lay.x_spectra, first))
                events.append(fft.forward(buffers.y, n0 * y_image, scratch, lay.dy_spectra,
                                          second))
                events.append(gemm(scratch, columns, accumulate=n0 > 0))
        if direction is WRW:
            events.append(weights_inverse(scratch, lay.weights, buffers.w, 0, weights))
        return events
    return invoker

