"""examples.Im2Col: forward convolution as im2col of one image at a time into the scratch buffer,
then a matrix product with the weights."""
from importlib import resources

import numpy as np
import pyopencl as cl
from convsolve import Direction, hookimpl

KERNELS = resources.files(__package__) / "kernels"


class Im2Col:
    name = "examples.Im2Col"
    family = "examples"
    directions = (Direction.FORWARD,)
    dynamic = True

    @hookimpl
    def is_applicable(self, problem):
        return problem.dtype == "float32"

    @hookimpl
    def get_wti(self, problem):
        return 0.05

    @hookimpl
    def workspace(self, problem):   # one image's columns: C*R*S rows of OH*OW floats
        return problem.c * problem.fil_h * problem.fil_w * problem.out_h * problem.out_w * 4

    @hookimpl
    def build_invoker(self, problem, handle):   # not tunable: no config argument
        im2col = handle.build(KERNELS / "im2col.cl", "im2col")   # dynamic: sizes as arguments
        gemm = handle.build(KERNELS / "im2col.cl", "columns_gemm")
        columns = (problem.c * problem.fil_h * problem.fil_w * problem.out_h * problem.out_w,)
        outputs = (problem.k * problem.out_h * problem.out_w,)
        sizes = problem.kernel_args()

        def invoker(buffers, scratch):   # the queue runs them in order, one image at a time
            events = []
            for image in range(problem.n):
                im2col.set_args(buffers.x, scratch, np.int32(image), *sizes)
                gemm.set_args(scratch, buffers.w, buffers.y, np.int32(image), *sizes)
                events += [cl.enqueue_nd_range_kernel(handle.queue, im2col, columns, None),
                           cl.enqueue_nd_range_kernel(handle.queue, gemm, outputs, None)]
            return events
        return invoker
