"""direct.Naive*: one work-item per output element; any spatial rank (1, 2, 3), layout per
tensor, stride, padding, dilation and groups; the output's epilogue fused into the store."""
import numpy as np
from convsolve import ALL_LAYOUTS, Direction, hookimpl, round_up, tuning

from . import configs
from .plan import KERNELS, enqueue, nd_sizes, set_args, set_sizes, three_d
from .solver import DirectSolver

#: Estimated fraction of peak: a scalar loop with no reuse reaches a few percent of it.
NAIVE_WTI = 0.01


def nd_args(problem):
    """naive_nd.cl's arguments after the buffers (ND_SIZES, then x's, w's and y's ND_STRIDES):
    the problem as a 3-D one, each tensor's element strides."""
    strides = [value for desc in (problem.x, problem.w, problem.y)
               for value in (*desc.strides[:2], *three_d(desc.strides[2:], 0))]
    return (*nd_sizes(problem), *(np.int32(value) for value in strides))


class _Naive(DirectSolver):
    """Shared body of the three naive solvers: a dynamic kernel launched over the output, the
    work-group size (WG) its one tunable.  2-D NCHW problems run naive.cl, all others
    naive_nd.cl (one build for every rank and layout); both store the whole epilogue with each
    output element, its channel the work-item's own in any layout (DirectSolver.fused_stages)."""

    kernel = None       # kernel name in naive.cl (naive_nd.cl's: "naive_" made "naive_nd_")
    spatial_dims = (1, 2, 3)
    layouts = ALL_LAYOUTS

    @property
    def directions(self):
        return (self.direction,)

    @hookimpl
    def get_wti(self, problem):
        return NAIVE_WTI

    @hookimpl
    def workspace(self, problem):
        return 0

    @hookimpl
    def config_space(self, problem):
        return configs.NAIVE_SPACE

    @hookimpl
    def default_config(self, problem, handle):
        wanted = tuning.pick(configs.NAIVE_DEFAULT_CONFIGS, handle.device)["WG"]
        return {"WG": min(wanted, max(32, handle.device.max_work_group_size))}

    @hookimpl
    def check_config(self, problem, handle, config):
        limit = handle.device.max_work_group_size
        if config["WG"] > limit:
            return [f"work-group of {config['WG']} > the device's {limit}"]
        return []

    @hookimpl
    def build_invoker(self, problem, handle, config):
        if problem.is_2d_nchw:
            kernel = handle.build(KERNELS / "naive.cl", self.kernel, problem.epilogue_defines())
            values_at = set_sizes(kernel, 3, problem)
        else:
            kernel = handle.build(KERNELS / "naive_nd.cl",
                                  self.kernel.replace("naive_", "naive_nd_"),
                                  problem.epilogue_defines())
            values_at = set_args(kernel, 3, nd_args(problem))
        count = getattr(problem, self.direction.output).size
        local = (config["WG"],)
        global_size = (round_up(count, local[0]),)

        def invoker(buffers, scratch):
            return [enqueue(handle, kernel, global_size, local, *buffers,
                            values=buffers.epilogue_args, at=values_at)]
        return invoker


class NaiveFwd(_Naive):
    name = "direct.NaiveFwd"
    direction = Direction.FORWARD
    kernel = "naive_fwd"


class NaiveBwdData(_Naive):
    name = "direct.NaiveBwdData"
    direction = Direction.BACKWARD_DATA
    kernel = "naive_bwd_data"


class NaiveBwdWeights(_Naive):
    name = "direct.NaiveBwdWeights"
    direction = Direction.BACKWARD_WEIGHTS
    kernel = "naive_bwd_weights"
