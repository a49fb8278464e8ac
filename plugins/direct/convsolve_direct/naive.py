"""direct.Naive*: one work-item per output element; any stride, padding, dilation and groups."""
from importlib import resources

import pyopencl as cl
from convsolve import Direction, hookimpl, round_up

KERNELS = resources.files(__package__) / "kernels"
WORK_GROUP = 64   # work-items per group; the range is rounded up to it (kernels guard the tail)

#: Estimated fraction of peak: a scalar loop with no reuse reaches a few percent of it.
NAIVE_WTI = 0.01


class _Naive:
    """Shared body of the three naive solvers: a dynamic kernel launched over the output."""

    family = "direct"
    dynamic = True
    kernel = None       # kernel name in naive.cl

    @property
    def directions(self):
        return (self.direction,)

    @hookimpl
    def is_applicable(self, problem):
        return problem.dtype == "float32"

    @hookimpl
    def get_wti(self, problem):
        return NAIVE_WTI

    @hookimpl
    def workspace(self, problem):
        return 0

    @hookimpl
    def build_invoker(self, problem, handle):
        kernel = handle.build(KERNELS / "naive.cl", self.kernel)
        count = getattr(problem, self.direction.output).size
        global_size = (round_up(count, WORK_GROUP),)
        for index, value in enumerate(problem.kernel_args(), start=3):
            kernel.set_arg(index, value)   # sizes once; a call sets only the buffers (fast)

        def invoker(buffers, scratch):
            for index, buffer in enumerate(buffers):
                kernel.set_arg(index, buffer)
            return [cl.enqueue_nd_range_kernel(handle.queue, kernel, global_size, (WORK_GROUP,))]
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
