"""examples.Pointwise: a tunable 1x1 forward convolution, TILE_K channels of TILE_P pixels per
work-item, with the output's epilogue fused into its store, and with constant weights its
weights transposed once (build_packing)."""
from importlib import resources

import pyopencl as cl
from convsolve import ConfigSpace, Direction, EpilogueArgs, Packing, ceil_div, hookimpl, tuning

KERNELS = resources.files(__package__) / "kernels"
DEFAULTS = {"cpu/vector16": {"TILE_K": 4, "TILE_P": 4}, "cpu": {"TILE_K": 4, "TILE_P": 2},
            "*": {"TILE_K": 2, "TILE_P": 1}}


class Pointwise:
    name = "examples.Pointwise"
    family = "examples"
    directions = (Direction.FORWARD,)
    dynamic = False

    @hookimpl
    def is_applicable(self, problem):   # a 1x1 kernel that reads no stride, pad or dilation
        return (problem.dtype == "float32" and problem.groups == 1
                and problem.fil_h == problem.fil_w == 1
                and problem.conv.strides == (1, 1) and problem.conv.dilations == (1, 1)
                and problem.conv.pads == ((0, 0), (0, 0)))

    @hookimpl
    def get_wti(self, problem):
        return 0.1

    @hookimpl
    def workspace(self, problem):
        return 0

    @hookimpl
    def fused_stages(self, problem):   # all of it: one work-item stores each y element once
        return len(problem.epilogue.stages)

    @hookimpl
    def config_space(self, problem):
        return ConfigSpace({"TILE_K": (1, 2, 4, 8), "TILE_P": (1, 2, 4, 8)},
                           constraints=["TILE_K * TILE_P <= 16"])   # accumulators per work-item

    @hookimpl
    def default_config(self, problem, handle):
        return dict(tuning.pick(DEFAULTS, handle.device))

    @hookimpl
    def build_invoker(self, problem, handle, config):
        kernel = handle.build(KERNELS / "pointwise.cl", "pointwise_fwd",
                              defines={**config, **problem.defines()})
        size = (problem.n * ceil_div(problem.k, config["TILE_K"])
                * ceil_div(problem.in_h * problem.in_w, config["TILE_P"]),)

        def invoker(buffers, scratch):   # an epilogue's values follow (bare: defaults, unread)
            values = (buffers.epilogue_args or EpilogueArgs()).kernel_args()
            kernel.set_args(buffers.x, buffers.w, buffers.y, *values)
            return [cl.enqueue_nd_range_kernel(handle.queue, kernel, size, None)]
        return invoker

    @hookimpl
    def build_packing(self, problem, handle, config):   # w transposed once: C x K
        transpose = handle.build(KERNELS / "pointwise.cl", "transpose_w",
                                 defines=problem.defines())
        run = self.build_invoker(problem, handle, {**config, "W_CK": 1})

        def pack(w, packed):
            transpose.set_args(w, packed)
            return [cl.enqueue_nd_range_kernel(handle.queue, transpose, (problem.k * problem.c,),
                                               None)]
        return Packing(problem.w.nbytes, pack,
                       lambda buffers, scratch, packed: run(buffers._replace(w=packed), scratch))
