"""Backward-bias: db = alpha * (dy summed over images and pixels) + beta * db_prior, on the device.

A deterministic reduction paced by memory (kernels/bias_grad.cl): the first pass splits each
channel's N * H * W floats into fixed chunks of one work-group each (spanning several images, or
a group taking several channels, when H * W is small), sums each with vector loads into a few
accumulators per work-item, then trees (lanes, local memory), and writes one partial sum per
chunk; the next pass sums each channel's partial sums the same way, until one value per channel
is left, and the last pass applies alpha and beta.  Sizes and load patterns are the device
type's (CONFIGS: a GPU's coalesced, a CPU's contiguous); the order of the additions depends on
the sizes and the config alone, so db is bitwise reproducible.  One float32 accumulator over N *
H * W floats would lose about two orders of magnitude of accuracy on a large layer; here a float
meets at most ``items / accs`` additions in one accumulator, then trees.  The partial sums of
the two most recent passes live in the scratch buffer (``backward_bias_workspace``).  The
passes' kernels are built and their sizes set once per handle and shape (``Handle.kept``), and
a call launches them back to back.
"""
import math
from dataclasses import dataclass
from importlib import resources

import numpy as np
import pyopencl as cl

from ..arith import ceil_div, round_up
from ..epilogue import finite
from ..errors import ValidationError
from ..problem import TensorDesc
from .run import check_handle, check_scratch

KERNELS = resources.files("convsolve") / "kernels"
#: Floats the scratch's second region is aligned to (the widest vector load).
ALIGN = 16


@dataclass(frozen=True)
class Config:
    """How a pass splits the work (bias_grad.cl's CS_BIAS_* defines): work-groups of ``group``
    work-items (a power of two), each summing up to ``items`` loads of ``vector`` floats into
    ``accs`` accumulators.  ``strided`` (a GPU's coalesced loads): a team's loads interleave,
    aligned, narrower (and as many more, into as many more accumulators) where ``vector`` does
    not divide H * W; else (a CPU's) each work-item's loads are contiguous, unaligned.  A channel
    that fits one chunk goes to the fewest work-items that load ``share`` vectors or fewer
    each, a group then taking several channels."""
    group: int
    items: int
    share: int
    vector: int
    accs: int
    strided: bool

    def unit(self, run):
        """Floats per unit of a pass over runs of ``run`` floats: strided, the widest power of
        two up to ``vector`` that divides ``run``; else 1."""
        unit = self.vector if self.strided else 1
        while run % unit:
            unit //= 2
        return unit

    def per_item(self, unit):
        """Units one work-item sums at most."""
        return self.items * self.vector // unit

    def team(self, units, unit):
        """Work-items per channel for ``units`` units of ``unit`` floats in one chunk."""
        team, share = self.group, self.share * self.vector // unit
        while team > 1 and (team // 2) * share >= units:
            team //= 2
        return team

    def defines(self, unit):
        """bias_grad.cl's defines for units of ``unit`` floats."""
        narrow = self.vector // unit if self.strided else 1
        return {"CS_BIAS_GROUP": self.group, "CS_BIAS_ITEMS": self.items * narrow,
                "CS_BIAS_ACCS": self.accs * narrow, "CS_BIAS_VECTOR": self.vector // narrow,
                "CS_BIAS_STRIDED": int(self.strided)}


#: Per device type: a GPU's work-groups read 128 KiB chunks with coalesced float4 loads, and
#: channels of one chunk with teams that load 8 vectors or fewer each; a CPU's read 32 KiB
#: contiguous chunks with float16 loads, and small channels with one work-item each (few
#: groups).  On the H200 (BENCHMARKS.md) the GPU config takes ResNet-50's dy at batch 32 in
#: 0.88-1.45x a copy's time, where 32 KiB chunks took up to 2.0x (two passes on 28x28 where one
#: does) and teams of 256 on small channels 1.66x (7x7); splitting channels into more chunks to
#: give every compute unit two groups helped no layer at batch 8 (and cost 1.55x on 56x56).
CONFIGS = {"gpu": Config(group=256, items=32, share=8, vector=4, accs=4, strided=True),
           "cpu": Config(group=4, items=128, share=128, vector=16, accs=4, strided=False)}


@dataclass(frozen=True)
class Pass:
    """One launch: each channel's ``units`` units of ``unit`` floats, in runs of ``run`` units,
    summed in ``chunks`` chunks (one: the last pass) by ``team`` work-items each (the whole
    group, or fewer when a channel is small: a group then sums group / team channels)."""
    run: int
    units: int
    chunks: int
    unit: int
    team: int


def config_for(handle):
    """The handle's device type's Config."""
    return CONFIGS["gpu" if handle.is_gpu else "cpu"]


def _desc(y_shape):
    """dy of any spatial rank and layout as the 2-D NCHW tensor of its memory: channels-first,
    (N, K, pixels, 1), each channel's pixels one run; channels-last, (N * pixels, K, 1, 1), runs
    of one float (the reduction's strided path: correct and deterministic, not bandwidth-bound:
    a channel's floats lie K apart)."""
    desc = y_shape if isinstance(y_shape, TensorDesc) else TensorDesc.make("dy_shape", y_shape)
    n, k, *spatial = desc.shape
    if desc.channels_last:
        return TensorDesc((n * math.prod(spatial), k, 1, 1), desc.dtype)
    return desc if len(spatial) == 2 else TensorDesc((n, k, math.prod(spatial), 1), desc.dtype)


def dy_desc(y_shape):
    """dy's TensorDesc for ``y_shape`` ((N, K, H, W), or a TensorDesc of any spatial rank and
    layout, as _desc lays it out), checked: N * H * W must be below 2**30."""
    desc = _desc(y_shape)
    if desc.size // max(desc.shape[1], 1) >= 2 ** 30:
        raise ValidationError("dy_shape", desc.shape, "N * H * W must be below 2**30")
    return desc


def passes(y_shape, config):
    """The reduction's passes over dy of ``y_shape`` under ``config``: the first over dy's N runs
    of H * W per channel, each later one over the previous pass's chunks, one run per channel."""
    n, _, h, w = _desc(y_shape).shape
    segments, run, out = n, h * w, []
    while True:
        unit = config.unit(run)
        units = segments * run // unit
        chunks = max(1, ceil_div(units, config.group * config.per_item(unit)))
        team = config.team(units, unit) if chunks == 1 else config.group
        out.append(Pass(run // unit, units, chunks, unit, team))
        if chunks == 1:
            return out
        segments, run = 1, chunks


def _regions(y_shape, config):
    """Float offsets of the scratch regions the passes but the last write, alternately, and the
    floats the scratch needs."""
    k = _desc(y_shape).shape[1]
    sizes = [k * step.chunks for step in passes(y_shape, config)[:-1]]
    if not sizes:
        return (0, 0), 0
    second = round_up(sizes[0], ALIGN)
    return (0, second), (second + sizes[1] if len(sizes) > 1 else sizes[0])


def backward_bias_workspace(y_shape, handle=None):
    """Bytes of scratch backward_bias needs for dy of ``y_shape`` (N, K, H, W) on ``handle``'s
    device, or on any device (None): the partial sums of two consecutive passes."""
    configs = [config_for(handle)] if handle is not None else CONFIGS.values()
    return max(4 * _regions(y_shape, config)[1] for config in configs)


def backward_bias(handle, y_shape, *, dy, db, alpha=1.0, beta=0.0, scratch=None):
    """Enqueue db = alpha * sum over (n, h, w) of dy + beta * db (db's prior contents, not read
    when beta == 0; dy not read when alpha == 0); returns the events.

    ``y_shape`` is dy's (N, K, H, W); ``dy`` and ``db`` are float32 buffers of at least N*K*H*W
    and K elements; ``scratch`` holds backward_bias_workspace(y_shape) bytes, or None to use the
    handle's.  Deterministic: the same dy gives bitwise the same db on the same device.
    """
    check_handle(handle)
    desc = dy_desc(y_shape)
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
    if k == 0:
        return []
    config = config_for(handle)
    reads = bool(alpha != 0 and desc.size)   # alpha 0: dy unread
    need = 4 * _regions(desc, config)[1] if reads else 0
    if need:
        scratch = scratch if scratch is not None else handle.scratch(need, "backward_bias")
    check_scratch(scratch, need, "backward_bias", handle)
    invoker = handle.kept(("convsolve.backward_bias", desc.shape, reads, config),
                          "backward_bias", lambda: _invoker(handle, desc, config, reads))
    return invoker(dy, db, scratch, alpha, beta)


def _invoker(handle, desc, config, reads):
    """invoker(dy, db, scratch, alpha, beta) -> events: the passes over dy of ``desc`` (one
    over db alone when not ``reads``), their kernels built and their sizes set once."""
    k = desc.shape[1]
    steps = passes(desc, config) if reads else [Pass(1, 0, 1, 1, 1)]
    regions = _regions(desc, config)[0]
    launches = []
    for index, step in enumerate(steps):
        kernel = handle.build(KERNELS / "bias_grad.cl", "cs_bias_sum", config.defines(step.unit))
        final = index == len(steps) - 1
        for position, value in ((1, 0 if index == 0 else regions[(index - 1) % 2]),
                                (2, step.run), (3, k), (4, step.units), (5, step.chunks),
                                (6, step.team), (8, 0 if final else regions[index % 2]),
                                (9, int(final))):
            kernel.set_arg(position, np.int32(value))
        kernel.set_arg(10, np.float32(1.0))   # read by the final pass only
        kernel.set_arg(11, np.float32(0.0))
        groups = ceil_div(k, config.group // step.team) * step.chunks
        launches.append((kernel, (groups * config.group,), (config.group,)))

    def invoker(dy, db, scratch, alpha, beta):
        # every argument set before the first launch, so that the launches follow back to back
        for index, (kernel, _, _) in enumerate(launches):
            kernel.set_arg(0, (dy if reads else db) if index == 0 else scratch)
            kernel.set_arg(7, db if index == len(launches) - 1 else scratch)
        final = launches[-1][0]
        final.set_arg(10, np.float32(alpha))
        final.set_arg(11, np.float32(beta))
        return [cl.enqueue_nd_range_kernel(handle.queue, kernel, size, local)
                for kernel, size, local in launches]
    return invoker
