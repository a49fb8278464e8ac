"""What the ranking model sees: a device's facts and a problem's engineered features."""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields

import numpy as np
import pyopencl as cl

from ..errors import ValidationError
from ..problem import Direction, Problem


@dataclass(frozen=True)
class DeviceFacts:
    """The device properties the features read (a device class's model learns them as inputs)."""

    compute_units: int
    vector_width: int          # native float vector width
    is_gpu: bool
    local_mem_bytes: int
    max_work_group_size: int
    global_mem_bytes: int

    @classmethod
    def from_cl(cls, device: cl.Device) -> DeviceFacts:
        """The facts of a pyopencl Device."""
        return cls(device.max_compute_units, device.native_vector_width_float,
                   bool(device.type & cl.device_type.GPU), device.local_mem_size,
                   device.max_work_group_size, device.global_mem_size)

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> DeviceFacts:
        """The facts of a dict such as to_dict gives or a dataset header's device (which says
        ``"type": "gpu"`` instead of ``is_gpu``; other keys are ignored); a ValidationError
        names a missing or wrong field."""
        if not isinstance(data, Mapping):
            raise ValidationError("device", data, "expected an object of device facts")
        kind = data.get("type")
        gpu = data.get("is_gpu", {"gpu": True, "cpu": False, "accelerator": False}.get(
            kind) if isinstance(kind, str) else None)
        if not isinstance(gpu, bool):
            raise ValidationError("device.is_gpu", gpu, "expected is_gpu true or false, or "
                                  "type cpu, gpu or accelerator")
        sizes = {item.name: data.get(item.name) for item in fields(cls) if item.name != "is_gpu"}
        for name, value in sizes.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValidationError(f"device.{name}", value, "expected a positive integer")
        return cls(is_gpu=gpu, **sizes)  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, int | bool]:
        """The facts as a JSON-ready dict (from_dict reads it back)."""
        return {item.name: getattr(self, item.name) for item in fields(self)}


#: The features problem_features returns, in order.  ``log_*`` are log2 (of at least 1, but
#: intensity and the per-CU ones may be negative); the implicit-GEMM sizes follow the direction
#: (fwd: M = N*OH*OW, N = K/g, K = C/g*R*S; bwd: M = N*H*W, N = C/g, K = K/g*R*S; wrw: M = K/g,
#: N = C/g*R*S, K = N*OH*OW); ``align_*`` count the factors of two of a size, up to 6 (64);
#: ``tiles_f*`` are the direction's output tiles of a Winograd-like F(m, .) (N * ceil(H/m) *
#: ceil(W/m), the image written: y, x for bwd); ``gemm_fill`` is the useful share of the 32x32
#: GEMM tiles; ``ratio_*`` are log2 of spatial size over channels, and of K over C.
FEATURE_NAMES = (
    "log_n", "log_c", "log_k", "log_in_h", "log_in_w", "log_out_h", "log_out_w", "log_groups",
    "log_c_per_group", "log_k_per_group", "log_flops", "log_bytes", "log_intensity",
    "log_gemm_m", "log_gemm_n", "log_gemm_k", "log_weights",
    "fil_h", "fil_w", "pad_h", "pad_w", "pad_asym_h", "pad_asym_w", "stride_h", "stride_w",
    "dilation_h", "dilation_w",
    "is_1x1", "is_3x3", "is_depthwise", "is_grouped", "dir_fwd", "dir_bwd", "dir_wrw",
    "align_c_per_group", "align_k_per_group", "align_nhw",
    "log_tiles_f2", "log_tiles_f4", "log_tiles_f6", "log_gemm_tiles", "gemm_fill",
    "ratio_in", "ratio_out", "ratio_k_c",
    "log_compute_units", "log_vector_width", "is_gpu", "log_local_mem", "log_flops_per_cu",
    "log_gemm_tiles_per_cu",
)
GEMM_TILE = 32   # the tile edge of log_gemm_tiles and gemm_fill


def _log2(value: float) -> float:
    return math.log2(value) if value > 1 else 0.0


def _log2_ratio(value: float, over: float) -> float:
    """log2(value / over), ``value`` taken as at least 1 (a zero batch has no flops)."""
    return math.log2(max(value, 1) / over)


def _align(value: int) -> float:
    """Factors of two of ``value``, at most 6."""
    return float(min((value & -value).bit_length() - 1, 6)) if value > 0 else 0.0


def _tiles(n: int, h: int, w: int, m: int) -> int:
    return n * -(-h // m) * -(-w // m)


def problem_features(problem: Problem, device: DeviceFacts) -> np.ndarray:
    """The float64 vector of FEATURE_NAMES for ``problem`` on ``device`` (a pure function)."""
    p, g = problem, problem.groups
    cg, kg, rs = p.c // g, p.k // g, p.fil_h * p.fil_w
    (pt, pb), (pl, pr) = p.conv.pads
    nhw = p.n * p.out_h * p.out_w
    if p.direction is Direction.FORWARD:
        gemm, image = (nhw, kg, cg * rs), (p.out_h, p.out_w)
    elif p.direction is Direction.BACKWARD_DATA:
        gemm, image = (p.n * p.in_h * p.in_w, cg, kg * rs), (p.in_h, p.in_w)
    else:
        gemm, image = (kg, cg * rs, nhw), (p.out_h, p.out_w)
    nbytes = p.x.nbytes + p.w.nbytes + p.y.nbytes
    gemm_tiles = g * -(-gemm[0] // GEMM_TILE) * -(-gemm[1] // GEMM_TILE)
    padded = GEMM_TILE * GEMM_TILE * max(gemm_tiles // g, 1)
    depthwise = g > 1 and cg == 1
    units = device.compute_units
    return np.array([
        _log2(p.n), _log2(p.c), _log2(p.k), _log2(p.in_h), _log2(p.in_w), _log2(p.out_h),
        _log2(p.out_w), _log2(g), _log2(cg), _log2(kg), _log2(p.flops), _log2(nbytes),
        _log2_ratio(p.flops, nbytes), _log2(gemm[0]), _log2(gemm[1]), _log2(gemm[2]),
        _log2(p.w.size),
        p.fil_h, p.fil_w, pt + pb, pl + pr, pb - pt, pr - pl, *p.conv.strides, *p.conv.dilations,
        rs == 1, p.fil_h == p.fil_w == 3, depthwise, g > 1 and not depthwise,
        p.direction is Direction.FORWARD, p.direction is Direction.BACKWARD_DATA,
        p.direction is Direction.BACKWARD_WEIGHTS,
        _align(cg), _align(kg), _align(nhw),
        *(_log2(_tiles(p.n, *image, m)) for m in (2, 4, 6)), _log2(gemm_tiles),
        gemm[0] * gemm[1] / padded,
        math.log2(p.in_h * p.in_w / p.c), math.log2(p.out_h * p.out_w / p.k),
        math.log2(p.k / p.c),
        _log2(units), _log2(device.vector_width), device.is_gpu, _log2(device.local_mem_bytes),
        _log2_ratio(p.flops, units), _log2_ratio(gemm_tiles, units),
    ], dtype=np.float64)
