"""The plugin's OpenCL kernels as Python objects: GEMM parameter sets per device, checks, launches."""
from importlib import resources
from typing import NamedTuple

import numpy as np
import pyopencl as cl
from convsolve import ConvsolveError

KERNELS = resources.files(__package__) / "kernels"

#: GEMM tunables by device type (TUNING.md has the measurements), largest tile first. Every set
#: names each tunable that shapes the launch; the first "cpu" set equals gemm.cl's #ifndef
#: defaults (a test checks it). A launch takes the first set whose tile its product fills
#: (M and N at least a tile) and which gives each compute unit FILL work-groups; else the last.
PARAMS = {
    "cpu": [{"WGD_M": 1, "WGD_N": 1, "TM": 6, "TN": 16, "VW": 8, "VWM": 6, "KU": 4, "MR": 16,
             "KB": 128, "NR": 1, "USE_LOCAL": 0, "KWG": 16, "DOUBLE_BUF": 1, "LPAD": 0, "PF": 1}],
    "gpu": [  # 128x128 tiles: 43.1 TFLOP/s at 4096^3 on the H200
            {"WGD_M": 16, "WGD_N": 8, "TM": 8, "TN": 16, "VW": 4, "VWM": 4, "KU": 4, "MR": 1,
             "KB": 64, "USE_LOCAL": 1, "KWG": 8, "DOUBLE_BUF": 1, "LPAD": 4},
            # 64x64 tiles: 1.4-2.3x the large set on ResNet-50's GEMMs with M = 64 or N = 49
            {"WGD_M": 8, "WGD_N": 16, "TM": 8, "TN": 4, "VW": 4, "VWM": 4, "KU": 4, "MR": 1,
             "KB": 64, "USE_LOCAL": 1, "KWG": 16, "DOUBLE_BUF": 1, "LPAD": 4}],
}
#: Changes to PARAMS for products with TRANS_A (backward data), by device type: on the CPU a
#: work-item copies its rows of A^T once for NR column tiles, and NR = 4 is 10-35% faster there
#: while it loses on the other transpositions (TUNING.md, round 3).
TRANS_A_PARAMS = {"cpu": {"NR": 4}, "gpu": {}}
#: Work-groups per compute unit a launch needs before it takes a larger tile.
FILL = 2
#: Consecutive output (im2col) and input (col2im) columns per work-item, by device type: on
#: PoCL a work-item per short run is slow (32 columns: 7 ms against 20 ms for 8 on ResNet-50's
#: 3x3 64-channel layer at batch 8); GPUs want one column per work-item, coalesced.
IM2COL_TW = {"cpu": 32, "gpu": 1}
COL2IM_TW = {"cpu": 32, "gpu": 1}

_GEMM_SCALARS = [np.int32] * 3 + [np.float32] * 2 + [None, np.int32, np.int32, np.int32] * 3
_CONV_INTS = [np.int32] * 14     # C H W OH OW R S stride_h stride_w pad_t pad_l dil_h dil_w groups


def device_kind(handle):
    """'gpu' for GPUs, else 'cpu': the key of PARAMS and IM2COL_TW."""
    return "gpu" if handle.device.type & cl.device_type.GPU else "cpu"


def check_params(params, device):
    """Reasons a GEMM parameter set cannot run on ``device`` (empty when it can)."""
    problems = []
    group = params["WGD_M"] * params["WGD_N"]
    if group > device.max_work_group_size:
        problems.append(f"work-group of {group} > the device's {device.max_work_group_size}")
    if params["USE_LOCAL"]:
        mwg, nwg = params["TM"] * params["WGD_M"], params["TN"] * params["WGD_N"]
        local = ((1 + params["DOUBLE_BUF"]) * params["KWG"]
                 * (mwg + params["LPAD"] + nwg + params["LPAD"]) * 4)
        if local > device.local_mem_size:
            problems.append(f"{local} bytes of local memory > the device's {device.local_mem_size}")
    return problems


class _Variant:
    """One built parameter set of the GEMM: its kernel and tile geometry."""

    def __init__(self, handle, params, trans_a, trans_b):
        self.kernel = handle.build(KERNELS / "gemm.cl", "gemm",
                                   {"TRANS_A": int(trans_a), "TRANS_B": int(trans_b), **params})
        self.kernel.set_scalar_arg_dtypes(_GEMM_SCALARS)
        self.tile_m = params["TM"] * params["WGD_M"] * params["MR"]
        self.tile_n = params["TN"] * params["WGD_N"] * params.get("NR", 1)  # NR: column tiles
        self.local = (params["WGD_N"], params["WGD_M"], 1)

    def global_size(self, m, n, batch):
        return (-(-n // self.tile_n) * self.local[0], -(-m // self.tile_m) * self.local[1], batch)


class Gemm:
    """A built batched GEMM (one transposition variant, every parameter set of the device)."""

    def __init__(self, handle, trans_a, trans_b):
        kind = device_kind(handle)
        sets = [dict(params, **TRANS_A_PARAMS[kind]) if trans_a else params
                for params in PARAMS[kind]]
        refused = {str(params): check_params(params, handle.device) for params in sets}
        usable = [params for params in sets if not refused[str(params)]]
        if not usable:
            raise ConvsolveError(f"gemm parameters {sets} do not fit {handle.name}: " + "; ".join(
                problem for problems in refused.values() for problem in problems))
        self.queue = handle.queue
        self.enough_groups = FILL * handle.device.max_compute_units
        self.variants = [_Variant(handle, params, trans_a, trans_b) for params in usable]

    def _variant(self, m, n, batch):
        for variant in self.variants[:-1]:
            size = variant.global_size(m, n, batch)
            groups = size[0] // variant.local[0] * (size[1] // variant.local[1]) * batch
            if m >= variant.tile_m and n >= variant.tile_n and groups >= self.enough_groups:
                return variant
        return self.variants[-1]

    def __call__(self, m, n, k, alpha, beta, a, b, c, batch=1):
        """Enqueue C = alpha op(A) op(B) + beta C; a, b, c are (buffer, offset, ld, batch stride)."""
        variant = self._variant(m, n, batch)
        variant.kernel.set_args(m, n, k, alpha, beta, *a, *b, *c)
        return cl.enqueue_nd_range_kernel(self.queue, variant.kernel,
                                          variant.global_size(m, n, batch), variant.local)


class View(NamedTuple):
    """Matrices in a buffer: matrix (image i, group g) starts at offset + i*image + g*group,
    rows ``ld`` elements apart. (A split reduction uses the image step for its slices.)"""

    buffer: object
    offset: int
    ld: int
    image: int
    group: int

    def at(self, image=0, group=0):
        return self._replace(offset=self.offset + image * self.image + group * self.group)


class Columns:
    """im2col, col2im and the output-gradient gather of one problem, into or out of Views."""

    def __init__(self, handle, problem):
        self.queue = handle.queue
        self.problem = p = problem
        (pt, _), (pl, _) = p.conv.pads
        self.conv_ints = (p.c, p.in_h, p.in_w, p.out_h, p.out_w, p.fil_h, p.fil_w,
                          *p.conv.strides, pt, pl, *p.conv.dilations, p.groups)
        # dy as the input of a 1x1 convolution: its column matrices are dy's own
        self.output_ints = (p.k, p.out_h, p.out_w, p.out_h, p.out_w, 1, 1, 1, 1, 0, 0, 1, 1,
                            p.groups)
        self.tw = IM2COL_TW[device_kind(handle)]
        self.im2col_kernel = handle.build(KERNELS / "im2col.cl", "im2col", {"IM2COL_TW": self.tw})
        self.im2col_kernel.set_scalar_arg_dtypes([None, np.int32, None, *[np.int32] * 4,
                                                  *_CONV_INTS])
        self.col2im_tw = COL2IM_TW[device_kind(handle)]
        self.col2im_kernel = handle.build(KERNELS / "col2im.cl", "col2im",
                                          {"COL2IM_TW": self.col2im_tw})
        self.col2im_kernel.set_scalar_arg_dtypes([None, *[np.int32] * 4, None, np.int32,
                                                  np.float32, np.float32, *_CONV_INTS])

    def im2col(self, x, image0, count, col):
        """Unfold images [image0, image0 + count) of x into the column matrices ``col``."""
        p = self.problem
        return self._unfold(x, image0 * p.c * p.in_h * p.in_w, count, col, self.conv_ints)

    def gather_outputs(self, dy, image0, count, dst):
        """Copy images [image0, image0 + count) of dy (per group Kg x OH*OW) into ``dst``."""
        p = self.problem
        return self._unfold(dy, image0 * p.k * p.out_h * p.out_w, count, dst, self.output_ints)

    def _unfold(self, src, src_offset, count, dst, ints):
        c, out_h, out_w, r, s, groups = ints[0], ints[3], ints[4], ints[5], ints[6], ints[-1]
        size = (out_h * -(-out_w // self.tw), c // groups * r * s, count * groups)
        self.im2col_kernel.set_args(src, src_offset, dst.buffer, dst.offset, dst.ld, dst.image,
                                    dst.group, *ints)
        return cl.enqueue_nd_range_kernel(self.queue, self.im2col_kernel, size, None)

    def col2im(self, col, dx, image0, count):
        """Fold the column matrices ``col`` into images [image0, image0 + count) of dx,
        overwriting them."""
        p = self.problem
        size = (p.in_h * -(-p.in_w // self.col2im_tw), p.c // p.groups, count * p.groups)
        self.col2im_kernel.set_args(col.buffer, col.offset, col.ld, col.image, col.group, dx,
                                    image0 * p.c * p.in_h * p.in_w, 1.0, 0.0, *self.conv_ints)
        return cl.enqueue_nd_range_kernel(self.queue, self.col2im_kernel, size, None)


class SumPartials:
    """The sum_partials kernel: the partial results of a split reduction added up in order."""

    def __init__(self, handle):
        self.queue = handle.queue
        self.kernel = handle.build(KERNELS / "sum_partials.cl", "sum_partials")
        self.kernel.set_scalar_arg_dtypes([None, np.int32, np.int32, np.int32, None, np.int32])

    def __call__(self, partial, offset, count, size, out, accumulate):
        """out (+)= the ``count`` partials of ``size`` elements starting at element ``offset``."""
        self.kernel.set_args(partial, offset, count, size, out, int(accumulate))
        return cl.enqueue_nd_range_kernel(self.queue, self.kernel, (-(-size // 64) * 64,), None)


def padded_pitch(count):
    """A row pitch >= count whose byte size is not a multiple of 4 KiB (such pitches halve the
    CPU GEMM's speed through cache-set conflicts)."""
    return count + 16 if (count * 4) % 4096 == 0 else count


def images_per_chunk(problem, bytes_per_image, budget):
    """How many images one workspace-sized chunk holds: as many as fit ``budget``, at least 1."""
    return max(1, min(problem.n, budget // max(1, bytes_per_image)))


#: Workspace budget per chunk of images: the chunk's per-image matrices fit it (see
#: matmul_conv.bytes_per_image; a split reduction's partial dW comes on top).
COLUMN_BUDGET_BYTES = 64 << 20
