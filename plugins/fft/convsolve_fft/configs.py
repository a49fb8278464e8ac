"""The FFT solvers' configs as data: the space and its constraints, the defaults per device
class, and the device's limits on them."""
from convsolve import ConfigSpace, tuning

#: The config space: FFT lanes and work-group, radix-4 stages, streaming spectra stores, the
#: product's frequency vector, register tile and work-group. README: "Configs and tuning".
CONFIG_SPACE = {"LANES": (1, 8, 16), "WG": (1, 64), "RADIX4": (0, 1), "STREAM": (0, 1),
                "GV": (1, 8, 16), "TM": (1, 2, 4, 6), "TN": (1, 2, 3, 4), "GL": (1, 64)}
CONFIG_CONSTRAINTS = (
    # vector lanes serve a CPU; several work-items per plane serve a GPU (lanes of one float)
    "(LANES == 1) == (WG > 1)",
    "(GV == 1) == (GL > 1)",
    # the register tile: at most 16 complex accumulators...
    "TM * TN <= 16",
    # ...and with vectors, accumulators and operands in the 32 registers of AVX-512
    "GV == 1 or 2 * TM * TN + 2 * (TM + TN) <= 32",
)
#: Defaults by device class (convsolve.tuning.pick): AVX-512 takes 16 lanes, AVX2 8 (and a
#: tile that fits its 16 ymm registers), GPUs one lane per work-item.
_FFT = {"RADIX4": 1, "STREAM": 1}
DEFAULT_CONFIGS = {
    "cpu/vector16": {"LANES": 16, "WG": 1, "GV": 16, "TM": 2, "TN": 4, "GL": 1, **_FFT},
    "cpu/vector8": {"LANES": 8, "WG": 1, "GV": 8, "TM": 2, "TN": 2, "GL": 1, **_FFT},
    "cpu": {"LANES": 8, "WG": 1, "GV": 8, "TM": 2, "TN": 2, "GL": 1, **_FFT},
    "gpu": {"LANES": 1, "WG": 64, "GV": 1, "TM": 4, "TN": 4, "GL": 64, **_FFT},
    "*": {"LANES": 8, "WG": 1, "GV": 8, "TM": 2, "TN": 2, "GL": 1, **_FFT},
}


#: The tunables that are work-group sizes (the FFTs' and the products').
GROUP_SIZES = ("WG", "GL")


def space(handle):
    """The config space on ``handle``'s device: work-groups no larger than it takes (WG = GL = 1,
    the CPU shape, fits every device).  Local memory limits no config: a plane that does not fit
    goes through global memory (transforms.in_local_memory)."""
    largest = handle.device.max_work_group_size
    return ConfigSpace({name: tuple(v for v in values if name not in GROUP_SIZES or v <= largest)
                        for name, values in CONFIG_SPACE.items()}, CONFIG_CONSTRAINTS)


def default(handle):
    """The config of ``handle``'s device class, or the CPU shape ("*": groups of one) where the
    device takes smaller work-groups than it asks."""
    config = dict(tuning.pick(DEFAULT_CONFIGS, handle.device))
    return config if space(handle).refusal(config) is None else dict(DEFAULT_CONFIGS["*"])


def refusals(handle, config):
    """Why ``config`` cannot run on ``handle``'s device (check_config)."""
    largest = handle.device.max_work_group_size
    return [f"{name}={config[name]} > the device's work-group size {largest}"
            for name in GROUP_SIZES if config[name] > largest]
