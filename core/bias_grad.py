"""Backward-bias: db = alpha * (dy summed over images and pixels) + beta * db_prior, on the device.

A deterministic tree reduction (kernels/bias_grad.cl): the first pass sums blocks of 64 elements
of each (image, channel) plane of dy as balanced binary trees, each later pass sums blocks of 64
of the partial sums, until one value per channel is left; the last pass applies alpha and beta.
One float32 accumulator over N * H * W elements would lose about two orders of magnitude of
accuracy on a large layer; the tree's error grows with log2(N * H * W).  The partial sums of the
two most recent passes live in the scratch buffer (``backward_bias_workspace``).
"""
from importlib import resources

import numpy as np
import pyopencl as cl

from .arith import ceil_div
from .epilogue import finite
from .errors import ValidationError
from .execute import check_handle, check_scratch
from .problem import TensorDesc

KERNELS = resources.files("convsolve") / "kernels"
#: Elements one work-item sums (CS_BIAS_BLOCK in bias_grad.cl).
BLOCK = 64


def _desc(y_shape):
    return y_shape if isinstance(y_shape, TensorDesc) else TensorDesc.make("dy_shape", y_shape)


def passes(y_shape):
    """The reduction's passes as (len, segments, blocks): each sums ``blocks`` blocks of each of
    ``segments`` runs of ``len`` elements per channel; the last leaves one value per channel."""
    n, _, h, w = _desc(y_shape).shape
    length, segments, out = h * w, n, []
    while True:
        blocks = ceil_div(length, BLOCK) if length else 1
        out.append((length, segments, blocks))
        if segments * blocks == 1:
            return out
        length, segments = segments * blocks, 1


def backward_bias_workspace(y_shape):
    """Bytes of scratch backward_bias needs for dy of ``y_shape`` (N, K, H, W): the partial sums
    of two consecutive passes (0 when one pass reduces everything)."""
    k = _desc(y_shape).shape[1]
    sizes = [k * segments * blocks for _, segments, blocks in passes(y_shape)[:-1]]
    return 4 * (sizes[0] + (sizes[1] if len(sizes) > 1 else 0)) if sizes else 0


def backward_bias(handle, y_shape, *, dy, db, alpha=1.0, beta=0.0, scratch=None):
    """Enqueue db = alpha * sum over (n, h, w) of dy + beta * db (db's prior contents, not read
    when beta == 0; dy not read when alpha == 0); returns the events.

    ``y_shape`` is dy's (N, K, H, W); ``dy`` and ``db`` are float32 buffers of at least N*K*H*W
    and K elements; ``scratch`` holds backward_bias_workspace(y_shape) bytes, or None to use the
    handle's.  Deterministic: the same dy gives bitwise the same db.
    """
    check_handle(handle)
    desc = _desc(y_shape)
    alpha, beta = finite("alpha", alpha), finite("beta", beta)
    k = desc.shape[1]
    for name, buffer, nbytes in (("dy", dy, desc.nbytes), ("db", db, 4 * k)):
        if buffer is None and nbytes == 0:
            continue
        if not isinstance(buffer, cl.Buffer):
            raise ValidationError(name, type(buffer).__name__, "expected a pyopencl.Buffer")
        if buffer.size < nbytes:
            raise ValidationError(f"{name} buffer size", buffer.size, f"needs {nbytes} bytes")
    if dy is not None and dy == db:
        raise ValidationError("db", "dy's buffer", "give db a buffer of its own")
    steps = passes(desc) if alpha != 0 and desc.size else [(0, 1, 1)]   # alpha 0: dy unread
    need = backward_bias_workspace(desc) if len(steps) > 1 else 0
    if need:
        scratch = scratch if scratch is not None else handle.scratch(need, "backward_bias")
    check_scratch(scratch, need, "backward_bias", handle)
    kernel = handle.build(KERNELS / "bias_grad.cl", "cs_bias_sum")
    kernel.set_scalar_arg_dtypes([None] + [np.int32] * 5 + [None] + [np.int32] * 2
                                 + [np.float32] * 2)
    events, source, offset = [], dy if dy is not None else db, 0
    second = k * steps[0][1] * steps[0][2] if len(steps) > 2 else 0   # region B, after A
    for index, (length, segments, blocks) in enumerate(steps):
        final = index == len(steps) - 1
        target, target_off = (db, 0) if final else (scratch, second if index % 2 else 0)
        kernel.set_args(source, offset, length, k, segments, blocks, target, target_off,
                        int(final), alpha, beta)
        events.append(cl.enqueue_nd_range_kernel(handle.queue, kernel,
                                                 (k * segments * blocks,), None))
        source, offset = target, target_off
    return events
