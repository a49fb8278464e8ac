"""The Winograd solvers' configs as data: the spaces per device type and their constraints, the
defaults per device class, and the device's limits on them."""
from convsolve import ConfigSpace, tuning

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
    # GPUs: scalar work-items in groups of 64 (correct everywhere; not tuned)
    "gpu": {"TM": 4, "VW": 1, "NV": 4, "MR": 1, "TT": 1, "WG": 64},
}
DEFAULT_CONFIGS["*"] = DEFAULT_CONFIGS["cpu"]

#: The config spaces, per device type.  TN = VW * NV divides plan.TILE_ALIGN (32) and TT
#: divides TN, so that the workspace does not depend on the config; TM divides the filter's
#: panels (plan.U_PANEL, 16); register tiles stay at 24 vectors or fewer (AVX-512 has 32).
CONFIG_SPACES = {
    "cpu": {"TT": (2, 4, 8, 16), "WG": (1, 16), "TM": (4, 8, 16), "VW": (8, 16),
            "NV": (1, 2, 4), "MR": (1, 4, 16)},
    "gpu": {"TT": (1, 2, 4), "WG": (64, 128, 256), "TM": (2, 4, 8), "VW": (1, 2, 4),
            "NV": (1, 2, 4), "MR": (1, 4)},
}
CONFIG_CONSTRAINTS = ["32 % (VW * NV) == 0", "(VW * NV) % TT == 0", "TM * NV <= 24"]
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
    return ConfigSpace(params, CONFIG_CONSTRAINTS)


def default(problem, handle, m):
    """The device class's config for ``problem`` with F(m x m, 3 x 3), with SMALL_RUN tiles per
    transform work-item where a tile row has no more (a run never spans two tile rows), and the
    space's largest work-group where the device takes none as large as the class's."""
    config = dict(tuning.pick(DEFAULT_CONFIGS, handle.device))
    if plan.geometry(problem, m).tiles_w <= SMALL_RUN < config["TT"]:
        config["TT"] = SMALL_RUN
    if config["WG"] > handle.device.max_work_group_size:
        config["WG"] = max(space(handle).params["WG"])
    return config


def refusals(handle, config):
    """Why ``config`` cannot run on ``handle``'s device (check_config)."""
    largest = handle.device.max_work_group_size
    return [f"work-group of {config['WG']} > the device's {largest}"] \
        if config["WG"] > largest else []
