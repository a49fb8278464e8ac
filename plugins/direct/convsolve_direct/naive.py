"""direct.Naive*: one work-item per output element; any stride, padding, dilation and groups;
the output's epilogue fused into the store."""
from convsolve import Direction, hookimpl, round_up, tuning

from . import configs
from .plan import KERNELS, enqueue, set_sizes
from .solver import DirectSolver

#: Estimated fraction of peak: a scalar loop with no reuse reaches a few percent of it.
NAIVE_WTI = 0.01


class _Naive(DirectSolver):
    """Shared body of the three naive solvers: a dynamic kernel launched over the output, the
    work-group size (WG) its one tunable."""

    kernel = None       # kernel name in naive.cl

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
        kernel = handle.build(KERNELS / "naive.cl", self.kernel, problem.epilogue_defines())
        count = getattr(problem, self.direction.output).size
        local = (config["WG"],)
        global_size = (round_up(count, local[0]),)
        values_at = set_sizes(kernel, 3, problem)

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
