"""The batched GEMM kernel gemm.cl: its parameter sets per device, their checks, its launches."""
from importlib import resources

import numpy as np
import pyopencl as cl
from convsolve import BuildError, ceil_div

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

_GEMM_SCALARS = [np.int32] * 3 + [np.float32] * 2 + [None, np.int32, np.int32, np.int32] * 3


def device_kind(handle):
    """'gpu' for GPUs, else 'cpu': the key of PARAMS (and of conv_layout's IM2COL_TW)."""
    return "gpu" if handle.is_gpu else "cpu"


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
        return (ceil_div(n, self.tile_n) * self.local[0],
                ceil_div(m, self.tile_m) * self.local[1], batch)


class Gemm:
    """A built batched GEMM (one transposition variant, every parameter set of the device)."""

    def __init__(self, handle, trans_a, trans_b):
        kind = device_kind(handle)
        sets = [dict(params, **TRANS_A_PARAMS[kind]) if trans_a else params
                for params in PARAMS[kind]]
        refused = {str(params): check_params(params, handle.device) for params in sets}
        usable = [params for params in sets if not refused[str(params)]]
        if not usable:
            raise BuildError(f"gemm parameters {sets} do not fit {handle.name}: " + "; ".join(
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
        """Enqueue C = alpha op(A) op(B) + beta C; a, b, c are (buffer, offset, ld, batch
        stride)."""
        variant = self._variant(m, n, batch)
        variant.kernel.set_args(m, n, k, alpha, beta, *a, *b, *c)
        return cl.enqueue_nd_range_kernel(self.queue, variant.kernel,
                                          variant.global_size(m, n, batch), variant.local)
