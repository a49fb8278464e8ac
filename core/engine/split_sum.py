"""The partial results of a split reduction added up in a fixed order, on the device."""
from importlib import resources

import numpy as np
import pyopencl as cl

from ..arith import round_up
from ..epilogue import Epilogue, EpilogueArgs
from ..errors import ValidationError

KERNELS = resources.files("convsolve") / "kernels"
#: Work-items per work-group (fewer where the device allows fewer): one work-item per element,
#: so any size gives the same bits.
GROUP = 64
INT32_MAX = 2 ** 31 - 1


class SplitSum:
    """kernels/split_sum.cl built on ``handle``, storing ``epilogue`` (a convsolve.Epilogue, the
    output's: a backward one's alpha and blend; None: the bare sum).  Build it with the invoker
    (build_invoker) and call it from the invoker: each call enqueues one launch.

    For a solver whose reduction is split into ``count`` parts, each written to its scratch as a
    partial result of ``size`` float32 elements one after the other: the parts are added up as a
    left fold in part order, one work-item per element and no atomics, so the sum is bitwise the
    same run after run (a deterministic solver may use it).
    """

    def __init__(self, handle, epilogue=None):
        if epilogue is not None and not isinstance(epilogue, Epilogue):
            raise ValidationError("epilogue", epilogue, "expected a convsolve.Epilogue or None")
        self.queue, self.epilogue = handle.queue, epilogue
        self.group = min(GROUP, handle.device.max_work_group_size)
        self.kernel = handle.build(KERNELS / "split_sum.cl", "cs_split_sum",
                                   epilogue.defines() if epilogue is not None else {})
        self.kernel.set_scalar_arg_dtypes(
            [None, np.int32, np.int32, np.int32, None, np.int32]
            + (EpilogueArgs.kernel_arg_dtypes() if epilogue is not None else []))

    def __call__(self, partials, out, count, size, *, offset=0, accumulate=False, values=None):
        """Enqueue out[i] = (out[i] +) partials[offset + i] + partials[offset + size + i] + ...
        (``count`` parts, in order) for i < ``size``; returns the event.

        ``accumulate``: the sum starts from out's prior contents (a reduction continued over
        several launches).  ``values``: the epilogue's (convsolve.EpilogueArgs, given exactly
        when built with one), applied to the sum as it is stored.  ``partials`` and ``out`` are
        distinct pyopencl buffers of float32, of at least ``offset + count * size`` and
        ``size`` elements.
        """
        for name, value, least in (("count", count, 1), ("size", size, 1), ("offset", offset, 0)):
            if not isinstance(value, (int, np.integer)) or not least <= value <= INT32_MAX:
                raise ValidationError(f"split sum {name}", value,
                                      f"expected an int from {least} to {INT32_MAX}")
        if (values is None) != (self.epilogue is None):
            raise ValidationError("split sum values", values,
                                  "give an EpilogueArgs exactly when built with an epilogue")
        for name, buffer, elements in (("partials", partials, offset + count * size),
                                       ("out", out, size)):
            if not isinstance(buffer, cl.Buffer) or buffer.size < 4 * elements:
                raise ValidationError(f"split sum {name}", buffer,
                                      f"expected a pyopencl.Buffer of {4 * elements} bytes or more")
        if partials == out:
            raise ValidationError("split sum out", "the partials' buffer", "give out its own")
        self.kernel.set_args(partials, offset, count, size, out, int(bool(accumulate)),
                             *(values.kernel_args() if values is not None else ()))
        return cl.enqueue_nd_range_kernel(self.queue, self.kernel,
                                          (round_up(size, self.group),), (self.group,))
