"""The tunables of the two kernels as data: the config space, the default configs per device
class and the device checks."""
import pyopencl as cl
from convsolve import ConfigSpace, Direction, ceil_div, tuning

from . import plan

#: Candidate values of every tunable, sorted. LOCAL picks the kernel: 1 = igemm_local.cl (GPUs:
#: BM x BN blocks staged BK deep in local memory, TM x TN per work-item, VW-wide local reads,
#: DOUBLE_BUF), 0 = igemm_vector.cl (CPUs: VK vectors of VW rows x TP columns per register tile,
#: MR tiles per work-item, A packed JB deep). Each kernel's #ifndef defaults are one of these.
TUNABLES = {
    "LOCAL": (0, 1),
    "BM": (32, 64, 128, 256), "BN": (32, 64, 128, 256), "BK": (8, 16), "TM": (4, 8, 16),
    "TN": (4, 8),
    "DOUBLE_BUF": (0, 1),
    "VW": (2, 4, 8, 16),
    "VK": (1, 2, 3, 4), "TP": (6, 7, 8, 12, 14, 16), "MR": (16, 64, 256), "JB": (32, 128, 512),
}
#: Each with its reason (plan.LOCAL_TUNABLES, VECTOR_TUNABLES: the tunables each kernel reads).
CONSTRAINTS = (
    # the other kernel's tunables are pinned, so that each config is one distinct build
    "LOCAL == 1 or (BM, BN, BK, TM, TN, DOUBLE_BUF) == (64, 64, 16, 4, 4, 1)",
    "LOCAL == 0 or (VK, TP, MR, JB) == (1, 8, 16, 128)",
    # local reads are float, float2 or float4; CPU vectors are 8 (AVX2) or 16 (AVX-512) wide
    "(VW <= 4) == (LOCAL == 1)",
    # a work-group of 64 to 256 work-items (2 to 8 NVIDIA warps)
    "LOCAL == 0 or 64 <= (BM // TM) * (BN // TN) <= 256",
    # at most 128 accumulators per work-item: with its operands and loads within the 255
    # registers an NVIDIA thread has (16 x 16 would spill)
    "LOCAL == 0 or TM * TN <= 128",
    # the work-group divides both staged slices and BK the work-group (igemm_local.cl #error)
    ("LOCAL == 0 or (BM * BK % ((BM // TM) * (BN // TN)) == 0"
     " and BN * BK % ((BM // TM) * (BN // TN)) == 0 and (BM // TM) * (BN // TN) % BK == 0)"),
    # the register tile fits 24 of the 32 zmm (AVX-512) or 12 of the 16 ymm registers, beside its
    # VK weight vectors (PoCL's LLVM 15 spilled accumulators of larger tiles; README.md)
    "LOCAL == 1 or VK * TP <= (24 if VW == 16 else 12)",
)

#: Default configs by device class (convsolve.tuning.pick); the register tile (VK, TP) and, for
#: GPUs, the block (GPU_BLOCKS) follow the problem (default). README.md gives the measurements.
DEFAULT_CONFIGS = {
    "cpu/vector16": {"LOCAL": 0, "VW": 16, "VK": 2, "TP": 8, "MR": 256, "JB": 128},
    "cpu/vector8": {"LOCAL": 0, "VW": 8, "VK": 2, "TP": 6, "MR": 256, "JB": 128},
    "cpu": {"LOCAL": 0, "VW": 8, "VK": 1, "TP": 8, "MR": 256, "JB": 128},
    "gpu/nvidia": {"LOCAL": 1, "BM": 128, "BN": 64, "BK": 16, "TM": 8, "TN": 4, "VW": 4,
                   "DOUBLE_BUF": 1},
    "gpu": {"LOCAL": 1, "BM": 64, "BN": 64, "BK": 16, "TM": 4, "TN": 4, "VW": 4,
            "DOUBLE_BUF": 1},
    "*": {"LOCAL": 1, "BM": 64, "BN": 64, "BK": 16, "TM": 4, "TN": 4, "VW": 4,
          "DOUBLE_BUF": 1},
}
#: The CPU kernel's speed per register tile (VK, TP), relative to the best: a forward 3x3
#: convolution whose windows lie inside the input (n8 c64 10x170 -> k192 8x168, every tile full),
#: one core of the Intel Xeon (AVX-512) of README.md, 2026-12-01, 130-194 GFLOP/s.  Tiles of 24
#: accumulators or fewer keep them in zmm registers; (2, 12) spills.  Used for AVX2 too, unmeasured.
TILE_EFFICIENCY = {(1, 6): 0.67, (1, 7): 0.75, (1, 8): 0.79, (1, 12): 0.86, (1, 14): 0.86,
                   (1, 16): 0.67, (2, 6): 0.93, (2, 7): 0.95, (2, 8): 0.99, (2, 12): 0.72,
                   (3, 6): 0.98, (3, 7): 0.98, (3, 8): 1.0, (4, 6): 0.92}
#: GPU blocks (BM, BN, TM, TN, BK, least depth) by device class and direction, in order of
#: preference: the default takes the first the device accepts (refusals) whose grid gives each
#: compute unit GPU_FILL work-groups, whose rows are GPU_USEFUL used (M = 64 fills half of a
#: 128-row block) and whose reduction (plan.gemm_j) is at least its least depth, else the last
#: the device accepts, else SMALLEST_LOCAL.  "gpu/nvidia": the lists that came nearest the
#: fastest of 38 blocks on 13 ResNet-50 and VGG-16 layers per direction on the H200 (README.md,
#: GPU blocks): 16 x 8 tiles only for deep reductions over many blocks (VGG-16's 3x3 layers),
#: else blocks of at most 128 registers a work-item (two or more work-groups per compute unit)
#: and 8 x 8 tiles of 64 or 128 work-items.
GPU_BLOCKS = {
    "gpu/nvidia": {
        Direction.FORWARD: ((256, 128, 16, 8, 8, 2048), (128, 64, 8, 4, 16, 0),
                            (128, 32, 8, 4, 16, 0), (64, 128, 8, 8, 16, 0)),
        Direction.BACKWARD_DATA: ((128, 128, 16, 8, 8, 4096), (64, 128, 4, 8, 8, 0),
                                  (32, 128, 4, 8, 8, 0), (64, 128, 8, 8, 16, 0)),
        Direction.BACKWARD_WEIGHTS: ((128, 64, 8, 8, 8, 0), (64, 64, 8, 8, 16, 0)),
    },
    "*": {direction: ((64, 64, 4, 4, 16, 0), (32, 32, 4, 4, 8, 0)) for direction in Direction},
}
GPU_FILL = 2
GPU_USEFUL = 0.75
#: The values the other kernel's tunables are pinned to (see CONSTRAINTS).
PINNED = {"BM": 64, "BN": 64, "BK": 16, "TM": 4, "TN": 4, "DOUBLE_BUF": 1,
          "VK": 1, "TP": 8, "MR": 16, "JB": 128}
#: The last resort of default_config when a device refuses its class's default (small local
#: memory or work-groups): 64 work-items and 4.5 KiB of local memory.
SMALLEST_LOCAL = {"LOCAL": 1, "BM": 32, "BN": 32, "BK": 8, "TM": 4, "TN": 4, "VW": 4,
                  "DOUBLE_BUF": 1}


def space():
    """The config space (the same for every problem)."""
    return ConfigSpace(TUNABLES, CONSTRAINTS)


def complete(config):
    """``config`` with the other kernel's tunables pinned."""
    return {**PINNED, **config}


def local_bytes(config, along_j):
    """Local memory the GPU kernel takes with ``config`` (as igemm_local.cl lays it out: the
    staged slices, B's rows padded when it is loaded along j, and one flag)."""
    pad = max(32 // config["BK"], config["VW"]) % 32
    ldb = config["BN"] + (pad if along_j else 0)
    return (1 + config["DOUBLE_BUF"]) * config["BK"] * (config["BM"] + pad + ldb) * 4 + 4


def private_bytes(config):
    """Private memory a work-item of the CPU kernel takes with ``config`` (igemm_vector.cl): the
    stash of MR register tiles and their columns' offsets, the packed chunk of A, its offsets and
    staged rows, the lanes of one tile (floats and ints of 4 bytes)."""
    rows, tiles, depth = config["VK"] * config["VW"], config["MR"], config["JB"]
    return 4 * (tiles * config["TP"] * (rows + 4) + 5 * tiles + depth * (rows + 6 + 32)
                + config["TP"] * rows)


def refusals(problem, config, device):
    """Why ``device`` cannot run ``config`` (work-group size, local memory; the CPU kernel on a
    device that is not a CPU); empty when it can."""
    if not config["LOCAL"]:
        if device.type & cl.device_type.CPU:
            return []
        return [(f"the CPU kernel keeps {private_bytes(config)} bytes of private memory per "
                 "work-item, more than a GPU holds in registers (LOCAL=1 is the GPU kernel)")]
    reasons = []
    group = (config["BM"] // config["TM"]) * (config["BN"] // config["TN"])
    if group > device.max_work_group_size:
        reasons.append(f"a work-group of {group} > the device's {device.max_work_group_size}")
    need = local_bytes(config, plan.b_along_j(problem))
    if need > device.local_mem_size:
        reasons.append(f"{need} bytes of local memory > the device's {device.local_mem_size}")
    return reasons


def tile_score(problem, vk, tp, vw):
    """How well a VK x TP register tile of VW-wide vectors suits ``problem``: the useful share
    of its rows (M) and of its row tiles (tile_width), times TILE_EFFICIENCY."""
    return (plan.useful(plan.gemm_m(problem), vk * vw) * plan.useful(plan.tile_width(problem), tp)
            * TILE_EFFICIENCY.get((vk, tp), 0.5))


def gpu_block(problem, device, config):
    """``config`` with the block GPU_BLOCKS gives ``problem`` on ``device`` (see there); None when
    the device accepts none of its class's blocks."""
    m, p, slices = plan.gemm_m(problem), plan.gemm_p(problem), plan.slices(problem, device)
    chosen = None
    for bm, bn, tm, tn, bk, least in tuning.pick(GPU_BLOCKS, device)[problem.direction]:
        candidate = dict(config, BM=bm, BN=bn, TM=tm, TN=tn, BK=bk)
        if refusals(problem, candidate, device):
            continue
        chosen = candidate
        if (ceil_div(m, bm) * ceil_div(p, bn) * slices >= GPU_FILL * device.max_compute_units
                and plan.useful(m, bm) >= GPU_USEFUL and plan.gemm_j(problem, device) >= least):
            break
    return chosen


def default(problem, device):
    """The device class's default for ``problem``: the vector kernel's register tile chosen by
    tile_score among those the space allows, the GPU's block from GPU_BLOCKS; the smallest local
    config if the device refuses its class's."""
    config = complete(dict(tuning.pick(DEFAULT_CONFIGS, device)))
    if config["LOCAL"]:
        config = gpu_block(problem, device, config) or config
    else:
        space_ = space()
        tiles = [(vk, tp) for vk in TUNABLES["VK"] for tp in TUNABLES["TP"]
                 if dict(config, VK=vk, TP=tp) in space_]
        config["VK"], config["TP"] = max(
            tiles, key=lambda t: (tile_score(problem, *t, config["VW"]), t[0] * t[1]))
    if refusals(problem, config, device):
        config = complete(dict(SMALLEST_LOCAL))
    return config

