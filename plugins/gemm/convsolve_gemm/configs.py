"""The batched GEMM kernel gemm.cl: its parameter sets per device, their checks, its launches."""
from importlib import resources

import numpy as np
import pyopencl as cl
from convsolve import BuildError, ConfigSpace, EpilogueArgs, ceil_div, tuning

KERNELS = resources.files(__package__) / "kernels"

#: Default GEMM parameter sets by device class (convsolve.tuning.pick: exact device, then
#: ``type/architecture``, ``type/vectorN``, ``type/vendor``, ``type``; TUNING.md has the
#: measurements), largest tile first. Every set names each tunable that shapes the launch; the
#: "cpu" set (AVX2) equals gemm.cl's #ifndef defaults (a test checks it). Without a tuned config
#: a product takes the first set whose tile it fills (M and N at least a tile) and which gives
#: each compute unit FILL work-groups; else the last.
PARAMS = {
    # AVX-512 (16 floats per vector): 6 x 32 tiles of float16, 12 zmm accumulators
    "cpu/vector16": [{"WGD_M": 1, "WGD_N": 1, "TM": 6, "TN": 32, "VW": 16, "VWM": 6, "KU": 4,
                      "MR": 16, "KB": 128, "NR": 1, "USE_LOCAL": 0, "KWG": 16, "DOUBLE_BUF": 1,
                      "LPAD": 0, "PF": 1}],
    # AVX2 (8 floats): 6 x 16 tiles of float8, 12 ymm accumulators
    "cpu": [{"WGD_M": 1, "WGD_N": 1, "TM": 6, "TN": 16, "VW": 8, "VWM": 6, "KU": 4, "MR": 16,
             "KB": 128, "NR": 1, "USE_LOCAL": 0, "KWG": 16, "DOUBLE_BUF": 1, "LPAD": 0, "PF": 1}],
    "gpu": [  # 128x128 tiles: 43.1 TFLOP/s at 4096^3 on the H200
            {"WGD_M": 16, "WGD_N": 8, "TM": 8, "TN": 16, "VW": 4, "VWM": 4, "KU": 4, "MR": 1,
             "KB": 64, "NR": 1, "USE_LOCAL": 1, "KWG": 8, "DOUBLE_BUF": 1, "LPAD": 4, "PF": 0},
            # 64x64 tiles: 1.4-2.3x the large set on ResNet-50's GEMMs with M = 64 or N = 49
            {"WGD_M": 8, "WGD_N": 16, "TM": 8, "TN": 4, "VW": 4, "VWM": 4, "KU": 4, "MR": 1,
             "KB": 64, "NR": 1, "USE_LOCAL": 1, "KWG": 16, "DOUBLE_BUF": 1, "LPAD": 4, "PF": 0}],
}
PARAMS["*"] = PARAMS["cpu"]
#: Changes to the default sets for products with TRANS_A (backward data), by device type: on
#: the CPU a work-item copies its rows of A^T once for NR column tiles, and NR = 4 is 10-35%
#: faster there while it loses on the other transpositions (TUNING.md, round 3).
TRANS_A_PARAMS = {"cpu": {"NR": 4}, "gpu": {}}
#: Work-groups per compute unit a launch needs before it takes a larger tile.
FILL = 2

#: The tuning spaces (convsolve.ConfigSpace data): register-tile CPU kernels, and local-memory
#: kernels on GPUs. Private memory per work-item stays under 192 KiB (PoCL keeps it on the stack)
#: and accumulators under 24 vectors (AVX-512 has 32 registers; AVX2 spills above 12, slowly).
CPU_SPACE = ConfigSpace(
    {"WGD_M": (1,), "WGD_N": (1,), "TM": (2, 4, 6, 8), "TN": (8, 16, 32, 48, 64),
     "VW": (4, 8, 16), "VWM": (2, 4, 6, 8), "KU": (1, 2, 4), "MR": (1, 4, 8, 16),
     "KB": (64, 128, 256), "NR": (1, 2, 4), "USE_LOCAL": (0,), "KWG": (16,), "DOUBLE_BUF": (1,),
     "LPAD": (0,), "PF": (0, 1)},
    ["TN % VW == 0", "VWM == TM", "TM * TN // VW <= 24",
     "2 * NR * KB * TN + MR * NR * TM * TN <= 49152", "MR > 1 or PF == 0"])
GPU_SPACE = ConfigSpace(
    {"WGD_M": (8, 16), "WGD_N": (8, 16), "TM": (4, 8), "TN": (4, 8, 16), "VW": (1, 2, 4),
     "VWM": (1, 2, 4), "KU": (4,), "MR": (1,), "KB": (64,), "NR": (1,), "USE_LOCAL": (1,),
     "KWG": (8, 16, 32), "DOUBLE_BUF": (0, 1), "LPAD": (0, 4), "PF": (0,)},
    ["TN % VW == 0", "TM % VWM == 0", "LPAD % VW == 0 and LPAD % VWM == 0",
     "(TM * WGD_M * KWG) % (WGD_M * WGD_N) == 0", "(TN * WGD_N * KWG) % (WGD_M * WGD_N) == 0"])


def space(handle):
    """The GEMM's tuning space on ``handle``'s device."""
    return GPU_SPACE if handle.is_gpu else CPU_SPACE


def default_params(handle, m, n, batch, trans_a):
    """The default parameter set for an M x N product of ``batch`` matrices on ``handle``: the
    device class's first set whose tile the product fills with FILL work-groups per compute
    unit, else its last."""
    sets = [dict(params, **TRANS_A_PARAMS[device_kind(handle)]) if trans_a
            else dict(params) for params in tuning.pick(PARAMS, handle.device)]
    enough = FILL * handle.device.max_compute_units
    for params in sets[:-1]:
        tile_m, tile_n = tile_shape(params)
        if m >= tile_m and n >= tile_n and ceil_div(m, tile_m) * ceil_div(n, tile_n) * batch >= enough:
            return params
    return sets[-1]


def tile_shape(params):
    """Rows and columns of C one work-group computes with ``params``."""
    return (params["TM"] * params["WGD_M"] * params["MR"],
            params["TN"] * params["WGD_N"] * params["NR"])


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


_GEMM_SCALARS = [np.int32] * 3 + [np.float32] * 2 + [None, np.int32, np.int32, np.int32] * 3


def device_kind(handle):
    """'gpu' for GPUs, else 'cpu': the key of TRANS_A_PARAMS and of conv_layout's IM2COL_TW."""
    return "gpu" if handle.is_gpu else "cpu"


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
    """A built batched GEMM: one transposition variant with one parameter set; with
    ``epilogue`` (a convsolve.Epilogue), that epilogue fused into its store of C, a convolution's
    output whose row m of batch b is channel chan[0] + b * chan[1] + m."""

    def __init__(self, handle, params, trans_a, trans_b, epilogue=None):
        problems = check_params(params, handle.device)
        if problems:
            raise BuildError(f"gemm parameters {params} do not fit {handle.name}: "
                             + "; ".join(problems))
        self.queue, self.epilogue = handle.queue, epilogue
        self.kernel = epilogue_kernel(
            handle, "gemm.cl", "gemm", {"TRANS_A": int(trans_a), "TRANS_B": int(trans_b),
                                        **params}, _GEMM_SCALARS, epilogue, [np.int32] * 2)
        self.tile_m, self.tile_n = tile_shape(params)
        self.local = (params["WGD_N"], params["WGD_M"], 1)

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
