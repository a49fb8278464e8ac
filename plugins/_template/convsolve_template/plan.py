"""A problem as template's kernel launches: what it builds and the invoker."""
from importlib import resources

import pyopencl as cl
from convsolve import ceil_div

from .configs import CONFIG

KERNELS = resources.files(__package__) / "kernels"


def build(problem, handle, config=CONFIG):
    """The invoker of ``problem``: direct_fwd.cl built with its sizes and ``config``."""
    kernel = handle.build(KERNELS / "direct_fwd.cl", "direct_fwd",
                          defines={**config, **problem.defines()})
    size = (problem.n * ceil_div(problem.k, config["TILE_K"]) * problem.out_h * problem.out_w,)

    def invoker(buffers, scratch):
        kernel.set_args(buffers.x, buffers.w, buffers.y)
        return [cl.enqueue_nd_range_kernel(handle.queue, kernel, size, None)]
    return invoker
