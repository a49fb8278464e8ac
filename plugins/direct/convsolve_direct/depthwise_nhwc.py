"""direct.DepthwiseNhwc: depthwise convolutions (groups = C, any multiplier) on channels-last
tensors of spatial rank 1 to 3, all three directions, a vector of channels per work-item
(kernels/depthwise_nhwc.cl): no transposes around direct.Depthwise (its `/nchw` composite).
Forward and backward-data read the weights transposed to taps x K (a tap's channels one vector)
in the workspace, or packed once per weights version when they are constant."""
import math

import numpy as np
from convsolve import ALL_LAYOUTS, Direction, Packing, ceil_div, hookimpl, round_up

from . import configs
from .configs import pick_default, work_group_reasons
from .depthwise import WTI
from .plan import KERNELS, Partials, enqueue, nd_sizes, set_args
from .solver import DirectSolver

KERNEL = {Direction.FORWARD: "dwl_fwd", Direction.BACKWARD_DATA: "dwl_bwd",
          Direction.BACKWARD_WEIGHTS: "dwl_wrw"}
#: Backward-weights' work units per partial tile, counted with vectors of this many channels
#: whatever the config's VW (Partials reads the problem only: the workspace is exact and
#: config-independent): ceil(K / UNIT_CHANNELS) * taps work-items.
UNIT_CHANNELS = 8
#: Output rows per partial tile of backward-weights at least: each tile costs a partial dW
#: written and read back.
MIN_PARTIAL_ROWS = 4


def channels(problem):
    """The channels a work-item's vector spans: the output's (K; C for backward-data)."""
    return problem.c if problem.direction is Direction.BACKWARD_DATA else problem.k


def pixel_axes(problem):
    """The spatial sizes of the tensor whose pixels the work-items cover: dx's for
    backward-data, else y's."""
    if problem.direction is Direction.BACKWARD_DATA:
        return problem.in_sizes
    return problem.out_sizes


class DepthwiseNhwc(DirectSolver):
    name = "direct.DepthwiseNhwc"
    directions = tuple(Direction)
    deterministic = True
    spatial_dims = (1, 2, 3)
    #: x and y channels-last (is_applicable); w in either layout: with one channel per group,
    #: K x 1 x Z x R x S and K x Z x R x S x 1 are one memory order (gemm.Gemm1x1's rule for its
    #: 1x1 weights), so a channels-first w needs no copy either.
    layouts = ALL_LAYOUTS

    @hookimpl
    def is_applicable(self, problem):
        return (super().is_applicable(problem) and problem.groups == problem.c
                and problem.x.channels_last and problem.y.channels_last)

    @hookimpl
    def get_wti(self, problem):
        return WTI

    @hookimpl
    def workspace(self, problem):
        """Forward and backward-data: the transposed weights (|w|); backward-weights: the
        partial dWs of a chunk (plan.Partials)."""
        if problem.direction is not Direction.BACKWARD_WEIGHTS:
            return problem.w.nbytes
        return self._partials(problem).workspace

    def _partials(self, problem):
        taps = math.prod(problem.fil_sizes)
        return Partials.plan(problem, ceil_div(problem.k, UNIT_CHANNELS) * taps,
                             MIN_PARTIAL_ROWS)

    @hookimpl
    def fused_stages(self, problem):
        """None: depthwise_nhwc.cl stores no epilogue; the core's pass applies it (channels-last,
        every rank)."""
        return 0

    @hookimpl
    def config_space(self, problem, handle):
        return (configs.DEPTHWISE_NHWC_GPU_SPACE if handle.is_gpu
                else configs.DEPTHWISE_NHWC_CPU_SPACE)

    @hookimpl
    def default_config(self, problem, handle):
        space = self.config_space(problem, handle)
        config = pick_default(configs.DEPTHWISE_NHWC_DEFAULT_CONFIGS, handle, space,
                              lambda config: None)
        narrowest = min(space.params["VW"])
        while config["VW"] > narrowest and channels(problem) % config["VW"]:
            config["VW"] //= 2   # whole vectors where a narrower one divides the channels
        while config["PX"] > 1 and config["PX"] >= 2 * pixel_axes(problem)[-1]:
            config["PX"] //= 2   # no wholly idle pixel on narrow images
        if self.check_config(problem, handle, config):
            return next(c for c in space if not self.check_config(problem, handle, c))
        return config

    @hookimpl
    def check_config(self, problem, handle, config):
        return work_group_reasons(handle, config["WG"])

    @hookimpl
    def build_invoker(self, problem, handle, config):
        if problem.direction is Direction.BACKWARD_WEIGHTS:
            return self._wrw_invoker(problem, handle, config)
        pack, run = self._stages(problem, handle, config)
        return lambda buffers, scratch: pack(buffers.w, scratch) + run(buffers, scratch)

    @hookimpl
    def build_packing(self, problem, handle, config):
        """Forward and backward-data: the weights transposed once per weights version (solver
        API 2.4); None for backward-weights, which writes them."""
        if problem.direction is Direction.BACKWARD_WEIGHTS:
            return None
        pack, run = self._stages(problem, handle, config)
        return Packing(problem.w.nbytes, pack, lambda buffers, scratch, packed: run(buffers, packed))

    def _build(self, problem, handle, config, name):
        """Kernel ``name`` of depthwise_nhwc.cl built with ``config``'s VW and PX."""
        return handle.build(KERNELS / "depthwise_nhwc.cl", name,
                            {"VW": config["VW"], "PX": config["PX"]})

    def _stages(self, problem, handle, config):
        """Forward and backward-data as ``pack(w, wt)``, dwl_weights writing the weights taps x
        K into the buffer ``wt``, and ``run(buffers, wt)``, the convolution reading them."""
        wg, taps = config["WG"], math.prod(problem.fil_sizes)
        transpose = self._build(problem, handle, config, "dwl_weights")
        set_args(transpose, 2, (np.int32(problem.k), np.int32(taps)))
        kernel = self._build(problem, handle, config, KERNEL[problem.direction])
        set_args(kernel, 3, nd_sizes(problem))
        *outer, width = pixel_axes(problem)
        items = round_up(ceil_div(channels(problem), config["VW"]) * problem.n * math.prod(outer)
                         * ceil_div(width, config["PX"]), wg)

        def pack(w, wt):
            return [enqueue(handle, transpose, (round_up(problem.k * taps, wg),), (wg,), w, wt)]

        def run(buffers, wt):   # dwl_fwd(x, wt, y), dwl_bwd(dx, wt, dy) alike
            return [enqueue(handle, kernel, (items,), (wg,), buffers.x, wt, buffers.y)]
        return pack, run

    def _wrw_invoker(self, problem, handle, config):
        vw, wg, n = config["VW"], config["WG"], problem.n
        kernel = self._build(problem, handle, config, KERNEL[problem.direction])
        at = set_args(kernel, 3, nd_sizes(problem))
        partials = self._partials(problem)
        at = set_args(kernel, at, (np.int32(partials.rows), np.int32(partials.tiles_per_image)))
        fold = partials.reducer(handle, problem)
        items = round_up(ceil_div(problem.k, vw) * math.prod(problem.fil_sizes), wg)

        def invoker(buffers, scratch):
            events = []
            for first, images in partials.chunks(n):
                kernel.set_arg(at, np.int32(first))
                tiles = partials.tiles(images)
                events.append(enqueue(handle, kernel, (items, tiles), (wg, 1), buffers.x,
                                      buffers.y, scratch))
                events.append(fold(buffers.w, scratch, tiles, first == 0))
            return events
        return invoker
