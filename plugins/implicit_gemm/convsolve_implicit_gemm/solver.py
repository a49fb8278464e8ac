"""The hooks the three implicit GEMM solvers share: applicability, WTI, workspace, the fused
epilogue, the tunable hooks and the invoker of igemm_local.cl or igemm_vector.cl (and
sum_splits.cl)."""
from importlib import resources

import numpy as np
import pyopencl as cl
from convsolve import Direction, ceil_div, hookimpl, round_up

from . import configs, plan

KERNELS = resources.files(__package__) / "kernels"
INT32_MAX = 2 ** 31 - 1
#: The kernels' a, b and out (igemm_common.cl) among the forward-sense buffers, by direction.
ROLES = {Direction.FORWARD: ("w", "x", "y"), Direction.BACKWARD_DATA: ("w", "y", "x"),
         Direction.BACKWARD_WEIGHTS: ("y", "x", "w")}
#: Work-items per group of sum_splits.cl.
SUM_GROUP = 64
#: igemm_vector.cl: work-items wanted per compute unit, so that a core slowed by other work is
#: balanced by the others; a work-item takes fewer than MR tiles when that many are not there.
ITEMS_PER_UNIT = 8


def _window_fits_int32(problem):
    """Whether the kernels' window offsets (row * width + column, with rows and columns anywhere
    in the padded input or in dy's border) stay inside an int."""
    (pt, pb), (pl, pr) = problem.conv.pads
    (dh, dw) = problem.conv.dilations
    rows = max(problem.in_h, problem.out_h) + pt + pb + problem.fil_h * dh
    cols = max(problem.in_w, problem.out_w) + pl + pr + problem.fil_w * dw
    return 2 * rows * cols + max(problem.x.size, problem.y.size) <= INT32_MAX


class ImplicitGemm:
    """A convolution as an implicit GEMM (igemm_common.cl): nothing unfolded in memory. A solver
    subclasses it, setting ``name`` and ``directions`` (one direction each)."""

    family = "implicit_gemm"
    dynamic = True

    @hookimpl
    def is_applicable(self, problem):
        return (problem.dtype == "float32" and _window_fits_int32(problem)
                and plan.workspace(problem) // 4 <= INT32_MAX)

    @hookimpl
    def get_wti(self, problem):
        return plan.wti(problem)

    @hookimpl
    def workspace(self, problem):
        return plan.workspace(problem)

    @hookimpl
    def fused_epilogue(self, problem):
        """All of it, in every direction: the kernel that writes the output (the GEMM, or
        backward weights' sum of its splits) stores each element once."""
        return len(problem.epilogue.stages)

    @hookimpl
    def config_space(self, problem):
        return configs.space()

    @hookimpl
    def default_config(self, problem, handle):
        return configs.default(problem, handle.device)

    @hookimpl
    def check_config(self, problem, handle, config):
        return configs.refusals(problem, config, handle.device)

    @hookimpl
    def build_invoker(self, problem, handle, config):
        config = config or configs.default(problem, handle.device)
        splits, total = plan.splits(problem), problem.w.size
        # the epilogue goes with the kernel that writes the output: the GEMM, or the sum
        kernel, size, local, extra = _kernel(
            problem if splits == 1 else problem.with_epilogue(None), handle, config)
        after = _set_args(kernel, 3, (*problem.kernel_args(), np.int32(splits), *extra))
        if splits > 1:
            summer = handle.build(KERNELS / "sum_splits.cl", "sum_splits",
                                  problem.epilogue_defines())
            stores, after = summer, _set_args(summer, 2, (np.int32(total), np.int32(splits)))
        else:
            stores = kernel
        a_name, b_name, out_name = ROLES[problem.direction]

        def invoker(buffers, scratch):
            out = getattr(buffers, out_name)
            _set_args(kernel, 0, (getattr(buffers, a_name), getattr(buffers, b_name),
                                  scratch if splits > 1 else out))
            if problem.epilogue is not None:
                _set_args(stores, after, buffers.epilogue.kernel_args())
            events = [cl.enqueue_nd_range_kernel(handle.queue, kernel, size, local)]
            if splits > 1:
                _set_args(summer, 0, (scratch, out))
                events.append(cl.enqueue_nd_range_kernel(
                    handle.queue, summer, (round_up(total, SUM_GROUP),), (SUM_GROUP,)))
            return events
        return invoker


def _set_args(kernel, first, values):
    """Set ``kernel``'s arguments from index ``first`` on; the index after them."""
    for index, value in enumerate(values, start=first):
        kernel.set_arg(index, value)
    return first + len(values)


def _kernel(problem, handle, config):
    """The kernel ``config`` picks, built for ``problem``'s direction, with its global and local
    sizes and the arguments it takes after SPLITS."""
    defines = configs.defines(problem, config)
    slices = plan.slices(problem)
    if config["LOCAL"]:
        kernel = handle.build(KERNELS / "igemm_local.cl", "igemm_local", defines)
        local = (config["BN"] // config["TN"], config["BM"] // config["TM"], 1)
        size = (ceil_div(plan.gemm_p(problem), config["BN"]) * local[0],
                ceil_div(plan.gemm_m(problem), config["BM"]) * local[1], slices)
        return kernel, size, local, ()
    kernel = handle.build(KERNELS / "igemm_vector.cl", "igemm_vector", defines)
    tiles = plan.vector_tiles(problem, config["TP"])
    blocks = ceil_div(plan.gemm_m(problem), config["VK"] * config["VW"])
    bands = ceil_div(ITEMS_PER_UNIT * handle.device.max_compute_units, blocks * slices)
    band = max(1, min(config["MR"], ceil_div(tiles, bands)))
    return kernel, (blocks, max(1, ceil_div(tiles, band)), slices), (1, 1, 1), (np.int32(band),)
