"""template.DirectFwd: forward direct convolution, compiled per problem, TILE_K channels per work-item."""
from importlib import resources

import pyopencl as cl
from convsolve import Direction, ceil_div, hookimpl

KERNELS = resources.files(__package__) / "kernels"


class DirectFwd:
    name = "template.DirectFwd"
    family = "direct"
    directions = (Direction.FORWARD,)
    dynamic = False          # sizes are compiled in: one build per problem
    tile_k = 4               # output channels per work-item (the TILE_K define)

    @hookimpl
    def is_applicable(self, problem):
        return problem.dtype == "float32"

    @hookimpl
    def get_wti(self, problem):
        return 0.02

    @hookimpl
    def workspace(self, problem):
        return 0

    @hookimpl
    def build_invoker(self, problem, handle):
        kernel = handle.build(KERNELS / "direct_fwd.cl", "direct_fwd",
                              {"TILE_K": self.tile_k, **problem.defines()})
        k_tiles = ceil_div(problem.k, self.tile_k)
        size = (problem.n * k_tiles * problem.out_h * problem.out_w,)

        def invoker(buffers, scratch):
            kernel.set_args(buffers.x, buffers.w, buffers.y)
            return [cl.enqueue_nd_range_kernel(handle.queue, kernel, size, None)]
        return invoker
