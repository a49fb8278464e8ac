"""The FFT solvers' configs as data: the space and its constraints, the defaults per device
class, and the device's limits on them."""
from convsolve import ConfigSpace, tuning

from .transforms import local_bytes

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


def space():
    """The config space (the same for every problem and device)."""
    return ConfigSpace(CONFIG_SPACE, CONFIG_CONSTRAINTS)


def default(handle):
    """The config of ``handle``'s device class."""
    return dict(tuning.pick(DEFAULT_CONFIGS, handle.device))


def refusals(layout, handle, config):
    """Why ``config`` cannot run ``layout``'s transforms on ``handle``'s device (check_config)."""
    device, reasons = handle.device, []
    local = local_bytes(layout.h.length, layout.w.length, config["LANES"])
    if local > device.local_mem_size:
        reasons.append(f"{local} bytes of local memory > the device's {device.local_mem_size}")
    for name in ("WG", "GL"):
        if config[name] > device.max_work_group_size:
            reasons.append(f"{name}={config[name]} > the device's work-group size "
                           f"{device.max_work_group_size}")
    return reasons
