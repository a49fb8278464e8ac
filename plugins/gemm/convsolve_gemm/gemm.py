"""The batched GEMM kernel gemm.cl built for one config and transposition, and its launches."""
from importlib import resources

import numpy as np
import pyopencl as cl
from convsolve import BuildError, EpilogueArgs, ceil_div

from .configs import refusals, tile_shape

KERNELS = resources.files(__package__) / "kernels"

_GEMM_SCALARS = [np.int32] * 3 + [np.float32] * 2 + [None, np.int32, np.int32, np.int32] * 3


def epilogue_kernel(handle, file, name, defines, scalars, epilogue, tail=()):
    """Kernel ``name`` of kernels/``file`` built with ``defines`` and ``epilogue``'s (a
    convsolve.Epilogue; None: bare), its scalar argument types ``scalars`` then, with an
    epilogue, CS_EPILOGUE_PARAMS' and ``tail``."""
    kernel = handle.build(KERNELS / file, name, {**defines,
                                                 **(epilogue.defines() if epilogue else {})})
    kernel.set_scalar_arg_dtypes(
        list(scalars) + (EpilogueArgs.kernel_arg_dtypes() + list(tail) if epilogue else []))
    return kernel


class Gemm:
    """A built batched GEMM: one transposition variant with one config; with
    ``epilogue`` (a convsolve.Epilogue), that epilogue fused into its store of C, a convolution's
    output whose row m of batch b is channel chan[0] + b * chan[1] + m.  With ``col_images``
    (local-memory configs, B not transposed) the columns of op(B) and C run over images side by
    side (gemm.cl's COL_IMAGES): the batch strides of B and C are then their image strides."""

    def __init__(self, handle, config, trans_a, trans_b, epilogue=None, col_images=False):
        problems = refusals(config, handle.device)
        if problems:
            raise BuildError(f"gemm config {config} does not fit {handle.name}: "
                             + "; ".join(problems))
        self.queue, self.epilogue = handle.queue, epilogue
        defines = {"TRANS_A": int(trans_a), "TRANS_B": int(trans_b), **config,
                   **({"COL_IMAGES": 1} if col_images else {})}   # other builds keep their keys
        self.kernel = epilogue_kernel(handle, "gemm.cl", "gemm", defines, _GEMM_SCALARS, epilogue,
                                      [np.int32] * 2)
        self.tile_m, self.tile_n = tile_shape(config)
        self.local = (config["WGD_N"], config["WGD_M"], 1)

    def global_size(self, m, n, batch):
        return (ceil_div(n, self.tile_n) * self.local[0],
                ceil_div(m, self.tile_m) * self.local[1], batch)

    def __call__(self, m, n, k, alpha, beta, a, b, c, batch=1, values=None, chan=(0, 0)):
        """Enqueue C = alpha op(A) op(B) + beta C; a, b, c are (buffer, offset, ld, batch
        stride). With an epilogue, C = its epilogue of op(A) op(B) with ``values``
        (EpilogueArgs) instead."""
        epilogue = (*values.kernel_args(), *chan) if self.epilogue else ()
        self.kernel.set_args(m, n, k, alpha, beta, *a, *b, *c, *epilogue)
        return cl.enqueue_nd_range_kernel(self.queue, self.kernel,
                                          self.global_size(m, n, batch), self.local)
