"""template.DirectFwd: forward direct convolution, compiled per problem, TILE_K channels per work-item."""
from importlib import resources

import pyopencl as cl
from convsolve import Direction, ceil_div, hookimpl

KERNELS = resources.files(__package__) / "kernels"


class DirectFwd:
    name = "template.DirectFwd"   # family.Name: stored in find-dbs, never rename it
    family = "direct"   # CONVSOLVE_DEBUG_CONV_<FAMILY>=0 turns the family off
    directions = (Direction.FORWARD,)
    dynamic = False   # sizes are compiled in: one build per problem
    tile_k = 4   # output channels per work-item (the TILE_K define)

    @hookimpl
    def is_applicable(self, problem):   # any stride, padding, dilation and groups
        return problem.dtype == "float32"

    @hookimpl
    def get_wti(self, problem):
        return 0.02   # estimated fraction of the device's peak; < 0 if unknown

    @hookimpl
    def workspace(self, problem):
        return 0   # exact bytes of scratch memory

    @hookimpl
    def build_invoker(self, problem, handle):
        kernel = handle.build(KERNELS / "direct_fwd.cl", "direct_fwd",
                              defines={"TILE_K": self.tile_k, **problem.defines()})
        size = (problem.n * ceil_div(problem.k, self.tile_k) * problem.out_h * problem.out_w,)

        def invoker(buffers, scratch):
            kernel.set_args(buffers.x, buffers.w, buffers.y)
            return [cl.enqueue_nd_range_kernel(handle.queue, kernel, size, None)]
        return invoker
