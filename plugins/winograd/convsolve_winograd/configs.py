"""The Winograd solvers' configs as data: the spaces per device type and their constraints, the
defaults per device class, and the device's limits on them."""
from convsolve import ConfigSpace, ceil_div, tuning

from . import plan

#: Default configs by device class (convsolve.tuning.pick): the GEMMs' register tile (TM rows
#: by NV vectors of VW) and row blocks per work-item (MR), the transforms' tiles per work-item
#: (TT), and the work-group size (WG; the GEMMs run in groups of one on CPUs).  The AVX-512 set
#: ("cpu/vector16") equals the .cl files' #ifndef defaults.
DEFAULT_CONFIGS = {
    # AVX-512: 8 x 32 register tiles of float16 (16 zmm accumulators), 16-lane transforms
    "cpu/vector16": {"TM": 8, "VW": 16, "NV": 2, "MR": 16, "TT": 16, "WG": 16},
    # AVX2: 4 x 16 tiles of float8 (8 ymm accumulators, 6 loads per 8 FMAs), 8-lane transforms
    "cpu": {"TM": 4, "VW": 8, "NV": 2, "MR": 16, "TT": 8, "WG": 16},
    # GPUs: the local-memory GEMM (GPU_BLOCKS: 64 x 64 blocks, BK 8, 4 x 4 per work-item,
    # unless the grid would be thin), scalar transforms in groups of 64 (not tuned).  BK 8: on
    # VGG-16's and ResNet-50's 3x3 layers in every direction (F4x3, F6x3, batch 32), 64 x 64
    # blocks with BK 8 took 0.70-1.03x the former default's time (BK 16) and were the fastest of
    # six blocks on 32 of the 36, 128 x 128, 128 x 64, 64 x 128 and 8 x 8 a work-item among the
    # slower (NVIDIA H100, 2026-12-07; BENCHMARKS.md "Session 62")
    "gpu": {"GEMM": "local", "BM": 64, "BN": 64, "BK": 8, "RM": 4, "RN": 4,
            "TM": 4, "VW": 1, "NV": 4, "MR": 1, "TT": 1, "WG": 64},
}
DEFAULT_CONFIGS["*"] = DEFAULT_CONFIGS["cpu"]

#: The config spaces, per device type.  TN = VW * NV divides plan.TILE_ALIGN (32) and TT
#: divides TN, so that the workspace does not depend on the config; TM divides the filter's
#: panels (plan.U_PANEL, 16); register tiles stay at 24 vectors or fewer (AVX-512 has 32).
#: The GPU space tries two transform shapes each (TT, WG): the transforms are memory-bound, and
#: three values each made 828 configs, more builds than a tune of one layer should cost.
CONFIG_SPACES = {
    "cpu": {"TT": (2, 4, 8, 16), "WG": (1, 16), "TM": (4, 8, 16), "VW": (8, 16),
            "NV": (1, 2, 4), "MR": (1, 4, 16)},
    "gpu": {"TT": (1, 4), "WG": (64, 256), "TM": (2, 4, 8), "VW": (1, 2, 4),
            "NV": (1, 2, 4), "MR": (1, 4), "GEMM": ("local", "vector"),
            "BM": (32, 64, 128), "BN": (32, 64, 128), "BK": (8, 16), "RM": (4, 8),
            "RN": (4, 8)},
}
CONFIG_CONSTRAINTS = ["32 % (VW * NV) == 0", "(VW * NV) % TT == 0", "TM * NV <= 24"]
#: The GPU space's GEMM picks the kernel: "local" (wino_gemm_local.cl: BM x BN blocks staged BK
#: deep in local memory, RM x RN per work-item) or "vector" (wino_gemm.cl, wino_gemm_wrw.cl:
#: the register tile TM x NV vectors of VW, MR blocks).  Configs without GEMM (the CPU space)
#: take the vector kernel.
GPU_CONSTRAINTS = [
    # the other kernel's tunables pinned, so that each config is one distinct build (VW is also
    # the filter transforms' lanes: 1 beside the local kernel)
    "GEMM == 'local' or (BM, BN, BK, RM, RN) == (64, 64, 8, 4, 4)",
    "GEMM == 'vector' or (TM, VW, NV, MR) == (4, 1, 4, 1)",
    # work-groups of 64 to 256 work-items (2 to 8 NVIDIA warps), each staging at least one
    # element of either slice (wino_gemm_local.cl #error)
    "GEMM == 'vector' or 64 <= (BM // RM) * (BN // RN) <= 256",
    "GEMM == 'vector' or BK * min(BM, BN) >= (BM // RM) * (BN // RN)",
]
#: The local kernel's blocks (BM, BN) with 4 x 4 per work-item, largest first: the "gpu" default
#: takes the first whose grid gives every compute unit a work-group (the chunks' products are
#: small: ResNet-50's 28x28x128 layer at batch 32 runs 224 tiles a chunk), else the last.
GPU_BLOCKS = ((64, 64), (32, 64), (32, 32))
#: Elements that pad the rows of the local GEMM's staged U or E slice (its PAD_A).
LOCAL_PAD = 4
#: Transform lanes for images of at most this many tiles per row (ResNet's 7x7 and 14x14 layers
#: with F(4,3) and F(6,3)): 16 lanes would be mostly idle there.  One value, not one per width,
#: to keep the number of builds down.
SMALL_RUN = 4


def space(handle):
    """The config space on ``handle``'s device type, without work-groups larger than the device
    takes (its largest where it takes none of the space's: the kernels take any local size)."""
    params = dict(CONFIG_SPACES["gpu" if handle.is_gpu else "cpu"])
    largest = handle.device.max_work_group_size
    params["WG"] = tuple(wg for wg in params["WG"] if wg <= largest) or (largest,)
    return ConfigSpace(params, CONFIG_CONSTRAINTS + (GPU_CONSTRAINTS if handle.is_gpu else []))


def local_bytes(config):
    """Local memory wino_gemm_local.cl takes with ``config``: two buffers of a BK-deep slice of
    either operand, as's rows padded by LOCAL_PAD."""
    return 2 * config["BK"] * (config["BM"] + LOCAL_PAD + config["BN"]) * plan.FLOAT


def local_group(config):
    """Work-items per work-group of wino_gemm_local.cl with ``config``."""
    return (config["BM"] // config["RM"]) * (config["BN"] // config["RN"])


def default(problem, handle, m):
    """The device class's config for ``problem`` with F(m x m, 3 x 3), with SMALL_RUN tiles per
    transform work-item where a tile row has no more (a run never spans two tile rows), and the
    space's largest work-group where the device takes none as large as the class's; the local
    GEMM's block from GPU_BLOCKS (the vector GEMM where the device refuses them all)."""
    config = dict(tuning.pick(DEFAULT_CONFIGS, handle.device))
    geo = plan.device_geometry(problem, m, handle)
    if geo.tiles_w <= SMALL_RUN < config["TT"]:
        config["TT"] = SMALL_RUN
    if config["WG"] > handle.device.max_work_group_size:
        config["WG"] = max(space(handle).params["WG"])
    if config.get("GEMM") == "local":
        cols = geo.depth if geo.wrw else geo.chunk_rows * geo.tiles_w
        fits = [dict(config, BM=bm, BN=bn) for bm, bn in GPU_BLOCKS
                if not refusals(handle, dict(config, BM=bm, BN=bn))]
        full = [c for c in fits if ceil_div(geo.rows, c["BM"]) * ceil_div(cols, c["BN"])
                * geo.positions * geo.groups >= handle.device.max_compute_units]
        config = (full or fits[-1:] or [dict(config, GEMM="vector", BM=64, BN=64)])[0]
    return config


def refusals(handle, config):
    """Why ``config`` cannot run on ``handle``'s device (check_config): work-groups larger than
    it takes, the local GEMM's local memory beyond its own."""
    device, reasons = handle.device, []
    if config["WG"] > device.max_work_group_size:
        reasons.append(f"work-group of {config['WG']} > the device's {device.max_work_group_size}")
    if config.get("GEMM") == "local":
        if local_group(config) > device.max_work_group_size:
            reasons.append(f"the local GEMM's work-group of {local_group(config)} > the "
                           f"device's {device.max_work_group_size}")
        if local_bytes(config) > device.local_mem_size:
            reasons.append(f"the local GEMM's {local_bytes(config)} bytes of local memory > "
                           f"the device's {device.local_mem_size}")
    return reasons
