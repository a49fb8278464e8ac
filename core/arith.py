"""Integer arithmetic of launch geometry and buffer layouts: ceiling division, rounding up."""

#: Offset of a part of scratch that the core cuts out as a sub-buffer (an epilogue candidate's
#: output copy, a layout candidate's tensor copies): a multiple of every device's sub-buffer
#: alignment (CL_DEVICE_MEM_BASE_ADDR_ALIGN), so the workspace a candidate reports does not
#: depend on the device.
ALIGN = 4096


def ceil_div(a, b):
    """The smallest integer >= a / b, for integers a >= 0 and b > 0."""
    return -(-a // b)


def round_up(a, b):
    """The smallest multiple of ``b`` that is >= ``a`` (a >= 0, b > 0)."""
    return ceil_div(a, b) * b
