"""The hooks both FFT solvers share: applicability, the cost model behind WTI and TiledFft's
tiling; configs.py has the configs, plan.py the invoker."""
import math

from convsolve import hookimpl, round_up

from . import configs, plan
from .layout import BWD, FWD, WRW
from .transforms import LONGEST

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
    if plan.small_weights(lay):
        weight_time = weights * 8 * lay.fp * lay.w.taps / DFT_EFFICIENCY
    else:
        weight_time = weights * per_plane
    planes = images * (p.c * lay.phases + p.k)
    traffic = 8 * lay.fp * (weights * (1 + len(lay.chunks())) + 2 * planes)
    return (products / GEMM_EFFICIENCY + planes * (per_plane + PLANE_OVERHEAD) + weight_time
            + traffic * FLOPS_PER_BYTE)


class FftSolver:
    """A convolution through 2-D FFTs (layout.py): the hooks; subclasses choose the layout."""

    family = "fft"
    dynamic = True
    deterministic = True
    directions = (FWD, BWD, WRW)
    #: Relative RMS error against float64 allowed: 5x the worst measured, 1.06e-6 on a 7x7
    #: layer of 2048 input channels (README: numerics).
    tolerance = 5e-6
    #: One non-finite input spoils the transforms it enters, so the output planes it reaches
    #: through the products (README: "Non-finite inputs").
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
    def config_space(self, problem, handle):
        return configs.space(handle)

    @hookimpl
    def default_config(self, problem, handle):
        return configs.default(handle)

    @hookimpl
    def check_config(self, problem, handle, config):
        return configs.refusals(handle, config)

    @hookimpl
    def build_invoker(self, problem, handle, config):
        config = config or self.default_config(problem, handle)
        return plan.build(problem, handle, self.layout(problem), config)


def whole_image_fits(layout):
    """Whether the fft2d kernels' private buffers hold the layout's transforms."""
    return layout.h.length // 2 <= LONGEST and layout.w.length <= LONGEST
