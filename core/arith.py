"""Integer arithmetic of launch geometry and buffer layouts: ceiling division, rounding up."""


def ceil_div(a, b):
    """The smallest integer >= a / b, for integers a >= 0 and b > 0."""
    return -(-a // b)


def round_up(a, b):
    """The smallest multiple of ``b`` that is >= ``a`` (a >= 0, b > 0)."""
    return ceil_div(a, b) * b
