"""The configs of the GEMM kernel gemm.cl: default configs per device class, the tuning spaces,
the default a product takes, and the checks against a device."""
from convsolve import ConfigSpace, ceil_div, tuning

#: Default GEMM configs by device class (convsolve.tuning.pick: exact device, then
#: ``type/architecture``, ``type/vectorN``, ``type/vendor``, ``type``; TUNING.md has the
#: measurements), largest tile first. Every config names each tunable that shapes the launch;
#: the "cpu" config (AVX2) equals gemm.cl's #ifndef defaults (a test checks it). Without a tuned
#: config a product takes the first config whose tile it fills (M and N at least a tile) and
#: which gives each compute unit FILL work-groups; else the last.
DEFAULT_CONFIGS = {
    # AVX-512 (16 floats per vector): 8 x 32 tiles of float16, 16 zmm accumulators (6 x 32
    # before 2026-12-07: ResNet-50 at batch 8 on a Zen 4, two A/B pairs, kernel time 0.99x
    # forward, 0.97x backward-data, 0.92x backward-weights; TUNING.md "round 5")
    "cpu/vector16": [{"WGD_M": 1, "WGD_N": 1, "TM": 8, "TN": 32, "VW": 16, "VWM": 8, "KU": 4,
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
DEFAULT_CONFIGS["*"] = DEFAULT_CONFIGS["cpu"]
#: Changes to the default configs for products with TRANS_A (backward data), by device type: on
#: the CPU a work-item copies its rows of A^T once for NR column tiles, and NR = 4 is 10-35%
#: faster there while it loses on the other transpositions (TUNING.md, round 3).
TRANS_A_CONFIG = {"cpu": {"NR": 4}, "gpu": {}}
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


def default(handle, m, n, batch, trans_a):
    """The default config for an M x N product of ``batch`` matrices on ``handle``: the device
    class's first config whose tile the product fills with FILL work-groups per compute unit,
    else its last."""
    candidates = _candidates(handle, trans_a)
    for config in candidates[:-1]:
        tile_m, tile_n = tile_shape(config)
        if m >= tile_m and n >= tile_n and work_groups(config, m, n, batch) >= filled(handle):
            return config
    return candidates[-1]


def smallest(handle, trans_a):
    """The device class's last config, its smallest tile: the default of products whose images
    lie side by side (plan.merges_images)."""
    return _candidates(handle, trans_a)[-1]


def _candidates(handle, trans_a):
    """The device class's default configs, largest tile first, with TRANS_A_CONFIG's changes
    for ``trans_a`` products."""
    return [dict(config, **TRANS_A_CONFIG[device_kind(handle)]) if trans_a else dict(config)
            for config in tuning.pick(DEFAULT_CONFIGS, handle.device)]


def work_groups(config, m, n, batch):
    """Work-groups of ``config``'s tiles over an M x N product of ``batch`` matrices."""
    tile_m, tile_n = tile_shape(config)
    return ceil_div(m, tile_m) * ceil_div(n, tile_n) * batch


def filled(handle):
    """Work-groups a launch needs to fill ``handle``'s device: FILL per compute unit."""
    return FILL * handle.device.max_compute_units


def tile_shape(config):
    """Rows and columns of C one work-group computes with ``config``."""
    return (config["TM"] * config["WGD_M"] * config["MR"],
            config["TN"] * config["WGD_N"] * config["NR"])


def refusals(config, device):
    """Reasons a GEMM config cannot run on ``device`` (empty when it can)."""
    problems = []
    group = config["WGD_M"] * config["WGD_N"]
    if group > device.max_work_group_size:
        problems.append(f"work-group of {group} > the device's {device.max_work_group_size}")
    if config["USE_LOCAL"]:
        mwg, nwg = config["TM"] * config["WGD_M"], config["TN"] * config["WGD_N"]
        local = ((1 + config["DOUBLE_BUF"]) * config["KWG"]
                 * (mwg + config["LPAD"] + nwg + config["LPAD"]) * 4)
        if local > device.local_mem_size:
            problems.append(f"{local} bytes of local memory > the device's {device.local_mem_size}")
    return problems


def device_kind(handle):
    """'gpu' for GPUs, else 'cpu': the key of TRANS_A_CONFIG and of conv_layout's IM2COL_TW."""
    return "gpu" if handle.is_gpu else "cpu"
