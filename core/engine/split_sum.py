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
    output's: a forward one's every stage, a backward one's alpha and blend; None: the bare sum).
    Build it with the invoker (build_invoker) and call it, or the function bound() returns, from
    the invoker: each call enqueues one launch.

    For a solver whose reduction is split into ``count`` parts, each written to its scratch as a
    partial result of ``size`` float32 elements one after the other: the parts are added up as a
    left fold in part order, one work-item per element and no atomics, so the sum is bitwise the
    same run after run (a deterministic solver may use it).
    """

    def __init__(self, handle, epilogue=None):
        if epilogue is not None and not isinstance(epilogue, Epilogue):
            raise ValidationError("epilogue", epilogue, "expected a convsolve.Epilogue or None")
        self.handle, self.queue, self.epilogue = handle, handle.queue, epilogue
        self.group = min(GROUP, handle.device.max_work_group_size)
        self.kernel = self._kernel()

    def _kernel(self):
        """A kernel of its own (the program is built once per handle)."""
        kernel = self.handle.build(KERNELS / "split_sum.cl", "cs_split_sum",
                                   self.epilogue.defines() if self.epilogue is not None else {})
        kernel.set_scalar_arg_dtypes(
            [None, np.int32, np.int32, np.int32, None, np.int32, np.int32, np.int32]
            + (EpilogueArgs.kernel_arg_dtypes() if self.epilogue is not None else []))
        return kernel

    def __call__(self, partials, out, count, size, *, offset=0, accumulate=False, values=None,
                 channels=(1, 1)):
        """Enqueue out[i] = (out[i] +) partials[offset + i] + partials[offset + size + i] + ...
        (``count`` parts, in order) for i < ``size``; returns the event.

        ``accumulate``: the sum starts from out's prior contents (a reduction continued over
        several launches).  ``values``: the epilogue's (convsolve.EpilogueArgs, given exactly
        when built with one), applied to the sum as it is stored, element i being channel
        (i // inner) % chans of ``channels`` = (chans, inner): a forward output's K and its
        pixels an image (channels-first) or 1 (channels-last); (1, 1), every element channel 0,
        for a backward output, whose stages take no channel.  ``partials`` and ``out`` are
        distinct pyopencl buffers of float32, of at least ``offset + count * size`` and
        ``size`` elements.
        """
        self._check(count, size, offset, channels)
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
                             *channels, *(values.kernel_args() if values is not None else ()))
        return cl.enqueue_nd_range_kernel(self.queue, self.kernel,
                                          (round_up(size, self.group),), (self.group,))

    def bound(self, count, size, *, offset=0, accumulate=False, channels=(1, 1)):
        """This sum with its scalar arguments (as __call__'s) checked once, on a kernel of its
        own: a function ``(partials, out, values=None)`` that sets the arguments (by type, in one
        call: a numpy scalar set alone costs microseconds) and enqueues, returning the event, for
        an invoker's hot path.  It checks nothing else: its caller vouches for the buffers (an
        invoker's, which the core checked: its workspace and its output) and gives ``values``
        exactly when this sum has an epilogue."""
        self._check(count, size, offset, channels)
        kernel, queue = self._kernel(), self.queue
        scalars = tuple(np.int32(v) for v in (offset, count, size))
        flags = tuple(np.int32(v) for v in (bool(accumulate), *channels))
        global_size, local_size = (round_up(size, self.group),), (self.group,)

        def enqueue(partials, out, values=None):
            kernel.set_args(partials, *scalars, out, *flags,
                            *(values.kernel_args() if values is not None else ()))
            return cl.enqueue_nd_range_kernel(queue, kernel, global_size, local_size)
        return enqueue

    @staticmethod
    def _check(count, size, offset, channels):
        """The scalar arguments in range, else a ValidationError naming the field."""
        chans, inner = channels
        for name, value, least in (("count", count, 1), ("size", size, 1), ("offset", offset, 0),
                                   ("channels", chans, 1), ("channel stride", inner, 1)):
            if not isinstance(value, (int, np.integer)) or not least <= value <= INT32_MAX:
                raise ValidationError(f"split sum {name}", value,
                                      f"expected an int from {least} to {INT32_MAX}")
