"""The hooks both FFT solvers share: applicability, cost estimate, config space, invokers."""
import math

import numpy as np
import pyopencl as cl
from convsolve import ConfigSpace, hookimpl, round_up, tuning

from .layout import BWD, FWD, WRW, upload
from .products import ComplexGemm
from .transforms import LONGEST, SMALL_KH, SMALL_TAPS, Transform, local_bytes

#: The config space (data): FFT lanes and work-group, radix-4 stages, streaming spectra stores,
#: the product's frequency vector, register tile and work-group. README: tunables.
SPACE = {"LANES": (1, 8, 16), "WG": (1, 64), "RADIX4": (0, 1), "STREAM": (0, 1),
         "GV": (1, 8, 16), "TM": (1, 2, 4, 6), "TN": (1, 2, 3, 4), "GL": (1, 64)}
CONSTRAINTS = (
    # vector lanes serve a CPU; several work-items per plane serve a GPU (lanes of one float)
    "(LANES == 1) == (WG > 1)",
    "(GV == 1) == (GL > 1)",
    # the register tile: at most 16 complex accumulators...
    "TM * TN <= 16",
    # ...and with vectors, accumulators and operands in the 32 registers of AVX-512
    "GV == 1 or 2 * TM * TN + 2 * (TM + TN) <= 32",
)
#: Defaults by device class (convsolve.tuning.pick): AVX-512 takes 16 lanes, AVX2 8 (and a
#: tile that fits its 16 ymm registers), GPUs one lane per work-item.
_FFT = {"RADIX4": 1, "STREAM": 1}
DEFAULTS = {
    "cpu/vector16": {"LANES": 16, "WG": 1, "GV": 16, "TM": 2, "TN": 4, "GL": 1, **_FFT},
    "cpu/vector8": {"LANES": 8, "WG": 1, "GV": 8, "TM": 2, "TN": 2, "GL": 1, **_FFT},
    "cpu": {"LANES": 8, "WG": 1, "GV": 8, "TM": 2, "TN": 2, "GL": 1, **_FFT},
    "gpu": {"LANES": 1, "WG": 64, "GV": 1, "TM": 4, "TN": 4, "GL": 64, **_FFT},
    "*": {"LANES": 8, "WG": 1, "GV": 8, "TM": 2, "TN": 2, "GL": 1, **_FFT},
}
#: The cost model behind get_wti and TiledFft's tile choice, in flops at the device's peak:
#: the fractions of peak the products, the FFTs (counted as 2.5 N log2 N flops a plane) and the
#: small weight DFTs reach, and the flops one byte of spectra traffic is worth (peak over memory
#: bandwidth). Measured on the AVX-512 CPU (README: performance); a GPU differs mostly in bytes.
GEMM_EFFICIENCY = 0.6
FFT_EFFICIENCY = 0.1
DFT_EFFICIENCY = 0.2
FLOPS_PER_BYTE = 16
#: What each plane transformed costs besides its flops (launch, index set-up, partly filled
#: lanes): about 0.2 us on the CPU, in flops at its peak.
PLANE_OVERHEAD = 60e3
#: WTI is kept within these bounds.
WTI_RANGE = (0.001, 1.0)


def estimated_time(layout):
    """Time of a problem laid out as ``layout``, in flops at peak (flops / peak = seconds)."""
    p, lay = layout.problem, layout
    images = p.n * lay.tiles
    products = 8 * lay.fp * p.k * lay.cg * images
    points, rows = lay.h.length * lay.w.length, lay.h.length // 2 + 1
    # the second pass runs rows in blocks of 16 lanes: 17 rows cost 32
    filled = 0.5 + 0.5 * round_up(rows, 16) / rows
    per_plane = 2.5 * points * math.log2(max(2, points)) * filled / FFT_EFFICIENCY
    weights = p.k * lay.cg
    if small_weights(lay):
        weight_time = weights * 8 * lay.fp * lay.w.taps / DFT_EFFICIENCY
    else:
        weight_time = weights * per_plane
    planes = images * (p.c * lay.phases + p.k)
    traffic = 8 * lay.fp * (weights * (1 + len(lay.chunks())) + 2 * planes)
    return (products / GEMM_EFFICIENCY + planes * (per_plane + PLANE_OVERHEAD) + weight_time
            + traffic * FLOPS_PER_BYTE)


def small_weights(layout):
    """Whether the weights' spectra come from dft_small.cl (a support of SMALL_TAPS squared)."""
    return (max(layout.h.taps, layout.w.taps) <= SMALL_TAPS
            and layout.h.length // 2 + 1 <= SMALL_KH)


class FftSolver:
    """A convolution through 2-D FFTs (layout.py): the hooks; subclasses choose the layout."""

    family = "fft"
    dynamic = True
    deterministic = True
    directions = (FWD, BWD, WRW)
    #: Relative RMS error against float64 allowed: 5x the worst measured, 1.06e-6 on a 7x7
    #: layer of 2048 input channels (README: numerics).
    tolerance = 5e-6
    #: One non-finite input spoils the transforms it enters (README: "Non-finite inputs").
    nonfinite = "spread"

    def layout(self, problem):
        """The Layout the solver uses for ``problem``, or None when it declines."""
        raise NotImplementedError

    @hookimpl
    def is_applicable(self, problem):
        if problem.dtype != "float32":
            return False
        layout = self.layout(problem)
        return layout is not None and layout.fits()

    @hookimpl
    def get_wti(self, problem):
        wti = problem.flops / estimated_time(self.layout(problem))
        return min(max(wti, WTI_RANGE[0]), WTI_RANGE[1])

    @hookimpl
    def workspace(self, problem):
        return self.layout(problem).workspace

    @hookimpl
    def config_space(self, problem):
        return ConfigSpace(SPACE, CONSTRAINTS)

    @hookimpl
    def default_config(self, problem, handle):
        return dict(tuning.pick(DEFAULTS, handle.device))

    @hookimpl
    def check_config(self, problem, handle, config):
        device, lay = handle.device, self.layout(problem)
        reasons = []
        local = local_bytes(lay.h.length, lay.w.length, config["LANES"])
        if local > device.local_mem_size:
            reasons.append(f"{local} bytes of local memory > the device's {device.local_mem_size}")
        for name in ("WG", "GL"):
            if config[name] > device.max_work_group_size:
                reasons.append(f"{name}={config[name]} > the device's work-group size "
                               f"{device.max_work_group_size}")
        return reasons

    @hookimpl
    def build_invoker(self, problem, handle, config):
        config = config or self.default_config(problem, handle)
        return build_plan(problem, handle, self.layout(problem), config)


def whole_image_fits(layout):
    """Whether fft2d.cl's private buffers hold the layout's transforms."""
    return layout.h.length // 2 <= LONGEST and layout.w.length <= LONGEST


def build_plan(problem, handle, layout, config):
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
    small = small_weights(lay)     # dft_small.cl's separable DFTs for the weights
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

