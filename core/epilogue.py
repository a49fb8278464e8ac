"""Epilogues: what a convolution's output carries besides the convolution, as structure and values.

Forward, always in this order (issue 16; cuDNN's and MIOpen's fused operations):

    y = act(alpha * conv(x, w) * scale[k] + bias[k] + z_scale * z; a, b, g) + beta * y_prior

Backward-data and backward-weights take alpha and beta only (``dx = alpha * conv_bwd + beta *
dx_prior``).  The *structure* (:class:`Epilogue`: which parts are present, the activation's
mode) belongs to the Problem: it joins its key, so find-db records and built kernels never mix
structures.  The *values* (alpha, beta, z_scale, the activation's parameters, the scale / bias /
z buffers) come at run time (``EpilogueArgs``, ``buffers.epilogue_args``), so one built kernel serves
every value.  A coefficient of 0 means its operand is never read (beta = 0: a NaN-filled y stays
harmless; alpha = 0: the convolution's value is not used).  core/kernels/convsolve_epilogue.h
computes it, for fused solvers and the core's own pass alike.
"""
import math
from dataclasses import dataclass, fields
from typing import NamedTuple

import numpy as np

from .errors import ValidationError

#: The stages of an epilogue, in the order they apply; ``alpha`` is in every epilogue.
STAGES = ("alpha", "scale", "bias", "residual", "activation", "blend")

#: MIOpen's activation table (miopenActivationMode_t): name -> (mode number, MIOpen's name,
#: default parameters (a, b, g), formula).  Parameters are MIOpen's activAlpha, activBeta and
#: activGamma; NaN propagates through every mode.
ACTIVATIONS = {
    "identity": (0, "PASTHRU", (0.0, 0.0, 0.0), "x"),
    "logistic": (1, "LOGISTIC", (0.0, 0.0, 0.0), "1 / (1 + exp(-x))"),
    "tanh": (2, "TANH", (1.0, 1.0, 0.0), "b * tanh(a * x)"),
    "relu": (3, "RELU", (0.0, 0.0, 0.0), "max(0, x)"),
    "softrelu": (4, "SOFTRELU", (0.0, 0.0, 0.0), "log(1 + exp(x))"),
    "abs": (5, "ABS", (0.0, 0.0, 0.0), "|x|"),
    "power": (6, "POWER", (0.0, 1.0, 1.0), "(a + b * x) ^ g, 0 where a + b * x == 0"),
    "clipped_relu": (7, "CLIPPEDRELU", (6.0, 0.0, 0.0), "min(a, max(0, x))"),
    "leaky_relu": (8, "LEAKYRELU", (0.01, 0.0, 0.0), "x > 0 ? x : a * x (0 when a == 0)"),
    "elu": (9, "ELU", (1.0, 0.0, 0.0), "x > 0 ? x : a * (exp(x) - 1)"),
}
_ALIASES = {**{info[1].lower(): name for name, info in ACTIVATIONS.items()},
            "sigmoid": "logistic", "pasthru": "identity", "none": "identity"}
_NUMBERS = {str(info[0]): name for name, info in ACTIVATIONS.items()}


def activation_mode(value):
    """The canonical activation name of ``value``: a name of ACTIVATIONS, MIOpen's name
    (``LEAKYRELU``, ``PASTHRU``) or mode number (0 to 9, exactly); None is ``identity``."""
    if value is None:
        return "identity"
    text = str(value).strip().lower()
    name = _NUMBERS.get(text)   # matched whole: '-1' is no mode (it read as 1, logistic)
    if name is None:
        text = text.replace("-", "_")
        name = text if text in ACTIVATIONS else _ALIASES.get(text.replace("_", ""))
    if isinstance(value, bool) or name is None:
        raise ValidationError("activation", value, "expected one of " + ", ".join(ACTIVATIONS)
                              + " (or MIOpen's name, or its mode number 0 to 9)")
    return name


def _number(field, value):
    """``value`` as a float that is not NaN (inf is allowed: a parameter at its limit)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise ValidationError(field, value, "expected a number")
    if math.isnan(value):
        raise ValidationError(field, value, "must not be NaN")
    return float(value)


def finite(field, value):
    """``value`` as a finite float (alpha, beta, z_scale), else a ValidationError."""
    number = _number(field, value)
    if math.isinf(number):
        raise ValidationError(field, value, "must be finite")
    return number


@dataclass(frozen=True)
class Activation:
    """An activation with its run-time parameters; ``Activation("leaky_relu", a=0.1)``.

    ``mode`` is a name of ``convsolve.epilogue.ACTIVATIONS`` (or MIOpen's name or number);
    parameters left None take the mode's defaults (clipped_relu a=6, leaky_relu a=0.01, elu a=1,
    tanh a=b=1, power a=0, b=1, g=1).  The numpy API also takes a name alone.
    """

    mode: str = "identity"
    a: float = None
    b: float = None
    g: float = None

    def __post_init__(self):
        mode = activation_mode(self.mode)
        object.__setattr__(self, "mode", mode)
        for name, default in zip("abg", ACTIVATIONS[mode][2]):
            value = getattr(self, name)
            object.__setattr__(self, name, default if value is None else _number(
                f"activation.{name}", value))

    @classmethod
    def parse(cls, value, mode=None):
        """An Activation from None, a name, a tuple (name, a, b, g) or an Activation; ``mode``
        (a structure's) fills a None and must match the rest."""
        if isinstance(value, (tuple, list)):   # (name, a[, b[, g]])
            if not 1 <= len(value) <= 4:
                raise ValidationError("activation", value, "expected (name, a[, b[, g]]): "
                                      "a name and up to 3 parameters")
            activation = cls(*value)
        else:
            activation = value if isinstance(value, cls) else cls(mode if value is None else value)
        if mode is not None and activation.mode != activation_mode(mode):
            raise ValidationError("activation", value, f"the problem's epilogue has "
                                  f"{activation_mode(mode)!r}")
        return activation

    @property
    def params(self):
        """(a, b, g) as float32, the kernels' cs_act_a, cs_act_b, cs_act_g."""
        return tuple(np.float32(v) for v in (self.a, self.b, self.g))


@dataclass(frozen=True)
class Epilogue:
    """The structure of an epilogue: which parts are present (values come at run time).

    ``scale``: a per-output-channel scale[k]; ``bias``: a per-channel bias[k] (the shift);
    ``residual``: ``z_scale * z`` with z a tensor of the output's shape (it may be the output's
    own buffer); ``activation``: a mode of ACTIVATIONS; ``blend``: ``beta * y_prior``, the
    output's previous contents.  Alpha is part of every epilogue.  Backward directions take
    only ``blend`` (and alpha).  ``Epilogue()`` is ``y = alpha * conv``.
    """

    scale: bool = False
    bias: bool = False
    residual: bool = False
    activation: str = "identity"
    blend: bool = False

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name != "activation" and not isinstance(value, bool):
                raise ValidationError(f"epilogue.{f.name}", value, "expected True or False")
        object.__setattr__(self, "activation", activation_mode(self.activation))

    @property
    def stages(self):
        """The present stages in the order they apply, 'alpha' first (a subset of STAGES)."""
        present = {"alpha": True, "scale": self.scale, "bias": self.bias,
                   "residual": self.residual, "activation": self.activation != "identity",
                   "blend": self.blend}
        return tuple(stage for stage in STAGES if present[stage])

    def prefix(self, count):
        """The epilogue of this one's first ``count`` stages (count >= 1): what a solver that
        fuses them computes."""
        kept = self.stages[:count]
        return Epilogue("scale" in kept, "bias" in kept, "residual" in kept,
                        self.activation if "activation" in kept else "identity", "blend" in kept)

    def check(self, direction):
        """Refuse parts a direction does not have: backward directions take alpha and blend."""
        if direction.value != "fwd":
            extra = [s for s in self.stages if s not in ("alpha", "blend")]
            if extra:
                raise ValidationError("epilogue", self.key(), f"{direction.label} takes alpha "
                                      f"and blend (beta) only, not {', '.join(extra)}")
        return self

    def key(self):
        """'epi' and the present parts, e.g. 'epi.bias.residual.relu': the Problem key's tail."""
        parts = [s if s != "activation" else self.activation for s in self.stages[1:]]
        return ".".join(["epi", *parts])

    @classmethod
    def from_key(cls, text):
        """The Epilogue a key() describes."""
        parts = text.split(".")
        if parts[0] != "epi":
            raise ValidationError("epilogue key", text, "expected 'epi' and its parts")
        flags = {name: name in parts[1:] for name in ("scale", "bias", "residual", "blend")}
        modes = [p for p in parts[1:] if p not in flags]
        if len(modes) > 1 or any(p not in ACTIVATIONS for p in modes) or len(set(parts)) != len(
                parts):
            raise ValidationError("epilogue key", text, "unknown or repeated parts")
        epilogue = cls(**flags, activation=modes[0] if modes else "identity")
        if epilogue.key() != text:
            raise ValidationError("epilogue key", text, f"parts out of order ({epilogue.key()})")
        return epilogue

    def defines(self, fused=None):
        """The -D defines of convsolve_epilogue.h for this structure; with ``fused``, the core's
        pass after a solver computed the first ``fused`` stages (CS_EPI_FIRST)."""
        first = STAGES.index(self.stages[fused]) if fused else 0
        return {"CS_EPI": 1, "CS_EPI_SCALE": int(self.scale), "CS_EPI_BIAS": int(self.bias),
                "CS_EPI_RESIDUAL": int(self.residual), "CS_EPI_BLEND": int(self.blend),
                "CS_EPI_ACT": ACTIVATIONS[self.activation][0], "CS_EPI_FIRST": first}

    @property
    def reads_output(self):
        """Whether the output's prior contents may be read (blend, or a residual z that may be
        the output's own buffer): an unfused convolution then goes to scratch first."""
        return self.blend or self.residual


class EpilogueArgs(NamedTuple):
    """An epilogue's run-time values: what ``buffers.epilogue_args`` holds (pyopencl buffers of
    float32: ``scale`` and ``bias`` of K elements, ``z`` of the output's shape; None where the
    structure has no such part)."""

    alpha: float = 1.0
    beta: float = 0.0
    z_scale: float = 1.0
    activation: Activation = Activation()
    scale: object = None
    bias: object = None
    z: object = None

    def kernel_args(self):
        """The values as CS_EPILOGUE_PARAMS of convsolve_epilogue.h take them, in order."""
        return (np.float32(self.alpha), np.float32(self.beta), np.float32(self.z_scale),
                *self.activation.params, self.scale, self.bias, self.z)

    @staticmethod
    def kernel_arg_dtypes():
        """The types of kernel_args() for ``kernel.set_scalar_arg_dtypes`` (None: a buffer)."""
        return list(KERNEL_ARG_DTYPES)


#: Scalar argument types of CS_EPILOGUE_PARAMS, for ``kernel.set_scalar_arg_dtypes``.
KERNEL_ARG_DTYPES = [np.float32] * 6 + [None] * 3


def fold_batch_norm(gamma, beta, mean, var, eps=1e-5, bias=None):
    """(scale, bias) float32 arrays with ``conv * scale + bias == batch_norm(conv + bias)`` in
    inference: ``scale = gamma / sqrt(var + eps)``, ``bias = beta + (bias - mean) * scale``,
    computed in float64 on the host.  Every argument is one value per output channel."""
    arrays = {}
    for name, value in (("gamma", gamma), ("beta", beta), ("mean", mean), ("var", var),
                        ("bias", 0.0 if bias is None else bias)):
        arrays[name] = np.asarray(value, dtype=np.float64)
        if arrays[name].ndim > 1:
            raise ValidationError(name, arrays[name].shape, "expected one value per channel")
    shapes = {a.shape for a in arrays.values() if a.ndim}
    if len(shapes) > 1:
        raise ValidationError("batch-norm shapes", sorted(shapes), "must all be (K,)")
    eps = _number("eps", eps)
    if not (arrays["var"] + eps > 0).all():
        raise ValidationError("var + eps", float((arrays["var"] + eps).min()), "must be > 0")
    scale = arrays["gamma"] / np.sqrt(arrays["var"] + eps)
    shift = arrays["beta"] + (arrays["bias"] - arrays["mean"]) * scale
    shape = shapes.pop() if shapes else ()
    return (np.broadcast_to(scale, shape).astype(np.float32),
            np.broadcast_to(shift, shape).astype(np.float32))
