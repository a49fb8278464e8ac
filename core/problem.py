"""The convolution problem: tensor and convolution descriptors, validation, shapes and cache keys."""
from __future__ import annotations

import enum
import functools
import operator
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import SupportsIndex, TypeVar

import numpy as np

from .epilogue import Epilogue
from .errors import ValidationError

DTYPE_SIZES = {"float32": 4}  # float16 follows once a solver supports it
LAYOUTS = ("NCHW",)
#: Largest size, pad, stride, dilation, group count, tensor element count and padded extent a
#: Problem admits: kernels take sizes as int arguments (CS_CONV_PARAMS, kernel_args()), index
#: elements and work-items with them, and compute window coordinates (oh * stride - pad_top +
#: r * dilation, in [-pad_top, h + pad_bottom)) in int.  Solvers with stricter needs decline in
#: is_applicable (the gemm plugin's fits_int32 also bounds its workspace by the same number).
INT32_MAX = 2 ** 31 - 1

#: A tensor's sizes, as the API takes them: a tuple or a list of ints.
Shape = tuple[int, ...] | list[int]
_Two = tuple[int, int] | list[int]
#: A stride, dilation or output padding: an int for both spatial dims, or a pair (h, w).
IntPair = int | _Two
#: Padding: an IntPair, or per-side pairs ((top, bottom), (left, right)).
Padding = IntPair | tuple[_Two, _Two] | list[_Two]
#: Per-side pads as a ConvDesc holds them: ((top, bottom), (left, right)).
Pads = tuple[tuple[int, int], tuple[int, int]]
_T = TypeVar("_T")


_OUTPUTS = {"fwd": "y", "bwd": "x", "wrw": "w"}   # Direction.output


class Direction(enum.Enum):
    """Which of the three convolutions to compute; buffers keep their forward-sense roles."""

    FORWARD = "fwd"            # y = conv(x, w)
    BACKWARD_DATA = "bwd"      # x = conv_transpose(y, w)   (dx from dy)
    BACKWARD_WEIGHTS = "wrw"   # w = correlate(x, y)        (dw from x and dy)

    @classmethod
    def parse(cls, value: Direction | str) -> Direction:
        """A Direction from itself, its value ('fwd'), or a name ('forward', 'backward-data', ...)."""
        if isinstance(value, cls):
            return value
        text = str(value).strip().lower().replace("-", "_")
        aliases = {"forward": cls.FORWARD, "backward_data": cls.BACKWARD_DATA,
                   "backward_weights": cls.BACKWARD_WEIGHTS}
        for member in cls:
            if text in (member.value, member.name.lower()):
                return member
        if text in aliases:
            return aliases[text]
        raise ValidationError("direction", value, "expected forward, backward-data or backward-weights")

    @property
    def output(self) -> str:
        """The forward-sense name of the tensor this direction writes: 'y', 'x' or 'w'."""
        return _OUTPUTS[self.value]

    @property
    def label(self) -> str:
        """Human name as MIOpenDriver prints it: 'Forward', 'Backward Data', 'Backward Weights'."""
        return self.name.replace("_", " ").title()


def _positive_int(field: str, value: SupportsIndex, minimum: int = 1) -> int:
    """``value`` as an int in [minimum, INT32_MAX], else a ValidationError naming ``field``."""
    try:
        if isinstance(value, bool):
            raise TypeError
        number = operator.index(value)
    except TypeError:
        raise ValidationError(field, value, "expected an integer") from None
    if number < minimum:
        raise ValidationError(field, value, f"must be at least {minimum}")
    if number > INT32_MAX:
        raise ValidationError(field, value, "must fit a 32-bit int (at most 2**31 - 1)")
    return number


def _two(items: Iterable[_T]) -> tuple[_T, _T]:
    """The two items of ``items`` (a pair's, already checked to be two) as a 2-tuple."""
    first, second = items
    return first, second


def _pair(field: str, value: IntPair, minimum: int) -> tuple[int, int]:
    """An int or a pair of ints, as a 2-tuple of ints >= minimum."""
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ValidationError(field, value, "expected an int or a pair (h, w)")
        return _two(_positive_int(field, v, minimum) for v in value)
    number = _positive_int(field, value, minimum)
    return (number, number)


def parse_padding(padding: Padding) -> Pads:
    """Padding as an int, (pad_h, pad_w) or ((top, bottom), (left, right)) -> ((t, b), (l, r))."""
    if isinstance(padding, (tuple, list)) and len(padding) == 2 and all(
            isinstance(side, (tuple, list)) for side in padding):
        return _two(_pair("padding", side, 0) for side in padding)
    if isinstance(padding, (tuple, list)) and any(isinstance(p, (tuple, list)) for p in padding):
        raise ValidationError("padding", padding, "expected ((top, bottom), (left, right))")
    # an IntPair now (per-side pairs returned or refused above: mypy cannot narrow by all/any)
    pad_h, pad_w = _pair("padding", padding, 0)  # type: ignore[arg-type]
    return ((pad_h, pad_h), (pad_w, pad_w))


def split_output_padding(output_padding: IntPair, padding: IntPair = 0, stride: IntPair = 1,
                         dilation: IntPair = 1) -> Pads:
    """A transposed convolution's output_padding (int or pair, smaller than the stride or the
    dilation, as PyTorch requires) as two pairs: the part its convolution can express, at most
    padding + stride - 1, and the rest, rows and columns no input reaches (zeros)."""
    extras, pads = _pair("output_padding", output_padding, 0), _pair("padding", padding, 0)
    strides, dilations = _pair("stride", stride, 1), _pair("dilation", dilation, 1)
    for extra, u, d in zip(extras, strides, dilations):
        if extra >= u and extra >= d:
            raise ValidationError("output_padding", output_padding,
                                  f"must be smaller than the stride {u} or the dilation {d}")
    reach = _two(min(extra, pad + u - 1) for extra, pad, u in zip(extras, pads, strides))
    return reach, _two(extra - r for extra, r in zip(extras, reach))


@dataclass(frozen=True)
class TensorDesc:
    """A packed tensor: shape, element type and layout."""

    shape: tuple[int, ...]
    dtype: str = "float32"
    layout: str = "NCHW"

    @classmethod
    def make(cls, field: str, shape: Shape, dtype: str = "float32", layout: str = "NCHW",
             allow_zero_batch: bool = True) -> TensorDesc:
        """A validated TensorDesc; ``field`` names the argument in error messages."""
        if not isinstance(dtype, str) or dtype not in DTYPE_SIZES:
            raise ValidationError(f"{field}.dtype", dtype, f"supported: {sorted(DTYPE_SIZES)}")
        if not isinstance(layout, str) or layout not in LAYOUTS:
            raise ValidationError(f"{field}.layout", layout, f"supported: {list(LAYOUTS)}")
        if not isinstance(shape, (tuple, list)) or len(shape) != len(layout):
            raise ValidationError(field, shape, f"expected {len(layout)} sizes ({layout})")
        dims = tuple(_positive_int(f"{field}[{i}] ({layout[i]})", size,
                                   0 if (i == 0 and allow_zero_batch) else 1)
                     for i, size in enumerate(shape))
        desc = cls(dims, dtype, layout)
        if desc.size > INT32_MAX:
            raise ValidationError(field, dims, f"{desc.size} elements; at most 2**31 - 1 "
                                  "(kernels index elements with 32-bit ints)")
        return desc

    @functools.cached_property
    def size(self) -> int:
        """Number of elements."""
        count = 1
        for dim in self.shape:
            count *= dim
        return count

    @functools.cached_property
    def nbytes(self) -> int:
        """Bytes of a packed buffer holding the tensor."""
        return self.size * DTYPE_SIZES[self.dtype]


@dataclass(frozen=True)
class ConvDesc:
    """Convolution parameters: per-side pads, strides, dilations (one entry per spatial dim), groups."""

    pads: Pads                    # ((top, bottom), (left, right))
    strides: tuple[int, int]      # (stride_h, stride_w)
    dilations: tuple[int, int]    # (dilation_h, dilation_w)
    groups: int = 1


_KEY_RE = re.compile(
    r"^(?P<dir>fwd|bwd|wrw)-n(?P<n>\d+)-c(?P<c>\d+)-h(?P<h>\d+)-w(?P<w>\d+)-k(?P<k>\d+)"
    r"-y(?P<y>\d+)-x(?P<x>\d+)-p(?P<pt>\d+)\.(?P<pb>\d+)-q(?P<pl>\d+)\.(?P<pr>\d+)"
    r"-u(?P<u>\d+)-v(?P<v>\d+)-l(?P<l>\d+)-j(?P<j>\d+)-g(?P<g>\d+)-(?P<dtype>\w+)-(?P<layout>\w+)"
    r"(?:-(?P<epilogue>epi[\w.]*))?$")


@dataclass(frozen=True, eq=True)
class Problem:
    """One 2-D convolution problem, validated at construction; immutable and hashable.

    ``x``, ``w`` and ``y`` are the forward-sense tensors (input, weights, output) whatever the
    direction: backward-data computes x from y and w, backward-weights w from x and y.

    Sizes that kernels cannot take are refused here, with a ValidationError naming the field:
    every size, pad, stride, dilation and the group count, each tensor's element count and each
    padded input extent (h + top + bottom, w + left + right) must be at most INT32_MAX = 2**31 - 1.
    Whether the tensors fit a device is checked by find, the numpy API and the CLI
    (execute.check_device_limits); solvers with narrower limits decline in is_applicable.
    """

    direction: Direction
    x: TensorDesc
    w: TensorDesc
    y: TensorDesc
    conv: ConvDesc
    _epilogue: Epilogue | None = None   # read as `epilogue`; set with with_epilogue()

    def __post_init__(self) -> None:
        if self._epilogue is not None:
            if not isinstance(self._epilogue, Epilogue):
                raise ValidationError("epilogue", self._epilogue, "expected a convsolve.Epilogue")
            self._epilogue.check(self.direction)

    def __hash__(self) -> int:  # cached: run() looks problems up on every call
        try:
            return self.__dict__["_hash"]
        except KeyError:
            value = self.__dict__["_hash"] = hash((self.direction, self.x, self.w, self.y,
                                                   self.conv, self._epilogue))
            return value

    def __getstate__(self) -> dict:
        """The fields without the cached hash and key: a string's hash differs between
        processes, so a pickled Problem (a Dask job's) must compute its own."""
        return {k: v for k, v in self.__dict__.items() if k not in ("_hash", "_key")}

    @classmethod
    def conv2d(cls, x_shape: Shape, w_shape: Shape, stride: IntPair = 1, padding: Padding = 0,
               dilation: IntPair = 1, groups: int = 1,
               direction: Direction | str = Direction.FORWARD, dtype: str = "float32",
               epilogue: Epilogue | None = None) -> Problem:
        """The problem of convolving an NCHW ``x_shape`` with a KCRS ``w_shape`` (C per group),
        its output carrying ``epilogue`` (a convsolve.Epilogue) if given."""
        direction = Direction.parse(direction)
        x = TensorDesc.make("x_shape", x_shape, dtype)
        w = TensorDesc.make("w_shape", w_shape, dtype, allow_zero_batch=False)
        pads = parse_padding(padding)
        strides = _pair("stride", stride, 1)
        dilations = _pair("dilation", dilation, 1)
        groups = _positive_int("groups", groups)
        n, c, h, wd = x.shape
        k, c_per_group, r, s = w.shape
        if c % groups:
            raise ValidationError("groups", groups, f"input channels c={c} are not divisible by it")
        if k % groups:
            raise ValidationError("groups", groups, f"output channels k={k} are not divisible by it")
        if c_per_group != c // groups:
            raise ValidationError("w_shape[1] (C)", c_per_group,
                                  f"must be c/groups = {c}/{groups} = {c // groups}")
        out = []
        for axis, (size, fil, (lo, hi), u, d) in enumerate(zip(
                (h, wd), (r, s), pads, strides, dilations)):
            span = (fil - 1) * d + 1
            if size + lo + hi > INT32_MAX:
                raise ValidationError(("padded height", "padded width")[axis], size + lo + hi,
                                      f"{size} + pads {lo} + {hi}; at most 2**31 - 1 (kernels "
                                      "compute window coordinates in 32-bit ints)")
            extent = size + lo + hi - span
            if extent < 0:
                name = ("output height", "output width")[axis]
                raise ValidationError(name, extent // u + 1,
                                      f"padded input {size + lo + hi} is smaller than the "
                                      f"dilated filter {span}; the output must be at least 1")
            out.append(extent // u + 1)
        y = TensorDesc.make("y_shape (output)", (n, k, out[0], out[1]), dtype)
        return cls(direction, x, w, y, ConvDesc(pads, strides, dilations, groups), epilogue)

    @classmethod
    def conv_transpose2d(cls, x_shape: Shape, w_shape: Shape, stride: IntPair = 1,
                         padding: IntPair = 0, output_padding: IntPair = 0, groups: int = 1,
                         dilation: IntPair = 1, direction: Direction | str = Direction.FORWARD,
                         dtype: str = "float32") -> Problem:
        """The problem that computes a transposed convolution (PyTorch's ConvTranspose2d, MIOpen's
        miopenTranspose) in ``direction`` as the convolution it transposes, so every solver serves it.

        ``x_shape`` is its NCHW input, ``w_shape`` its weights (C_in, C_out/groups, kH, kW);
        ``padding``, ``stride``, ``dilation`` and ``output_padding`` are ints or (h, w) pairs, and
        each output size is (H-1)*stride - 2*padding + dilation*(kH-1) + output_padding + 1.  The
        Problem convolves that output (its x) with the weights back to the input (its y): forward
        maps to backward-data (input -> y, output -> x), backward-data to forward (dy -> x,
        dx -> y), backward-weights to backward-weights (dy -> x, input -> y).
        """
        x = TensorDesc.make("x_shape", x_shape, dtype)
        w = TensorDesc.make("w_shape", w_shape, dtype, allow_zero_batch=False)
        strides, dilations = _pair("stride", stride, 1), _pair("dilation", dilation, 1)
        (n, c, *sizes), groups = x.shape, _positive_int("groups", groups)
        if w.shape[0] != c:
            raise ValidationError("w_shape[0] (C_in)", w.shape[0], f"must equal x_shape[1] = {c}")
        if c % groups:
            raise ValidationError("groups", groups, f"input channels {c} are not divisible by it")
        pads = _pair("padding", padding, 0)
        out_pads, zeros = split_output_padding(output_padding, padding, strides, dilations)
        if any(zeros):
            raise ValidationError("output_padding", output_padding, f"its last {zeros} rows, "
                                  f"columns get no input (zeros); a Problem takes {out_pads} at most")
        out, bottoms = [], []
        for axis, (size, fil, pad, extra, u, d) in enumerate(
                zip(sizes, w.shape[2:], pads, out_pads, strides, dilations)):
            out.append((size - 1) * u - 2 * pad + d * (fil - 1) + extra + 1)
            if out[-1] < 1:
                raise ValidationError(("output height", "output width")[axis], out[-1],
                                      "must be at least 1")
            bottoms.append(min(pad, pad - extra + u - 1))   # the convolution's output is `size`
        forward = {Direction.FORWARD: Direction.BACKWARD_DATA, Direction.BACKWARD_DATA:
                   Direction.FORWARD}.get(Direction.parse(direction), direction)
        return cls.conv2d((n, w.shape[1] * groups, *out), w.shape, strides,
                          _two(zip(pads, bottoms)), dilations, groups, forward, dtype)

    # {{{ derived sizes

    n = property(lambda self: self.x.shape[0], doc="Batch size.")
    c = property(lambda self: self.x.shape[1], doc="Input channels (all groups).")
    in_h = property(lambda self: self.x.shape[2], doc="Input height.")
    in_w = property(lambda self: self.x.shape[3], doc="Input width.")
    k = property(lambda self: self.w.shape[0], doc="Output channels (all groups).")
    fil_h = property(lambda self: self.w.shape[2], doc="Filter height.")
    fil_w = property(lambda self: self.w.shape[3], doc="Filter width.")
    out_h = property(lambda self: self.y.shape[2], doc="Output height.")
    out_w = property(lambda self: self.y.shape[3], doc="Output width.")
    groups = property(lambda self: self.conv.groups, doc="Group count.")
    dtype = property(lambda self: self.x.dtype, doc="Element type of all three tensors.")

    @property
    def flops(self) -> int:
        """Floating-point operations of the direct algorithm (2 per multiply-add), any direction."""
        return (2 * self.n * self.k * self.out_h * self.out_w
                * (self.c // self.groups) * self.fil_h * self.fil_w)

    @property
    def epilogue(self) -> Epilogue | None:
        """The output's epilogue structure (a `convsolve.Epilogue`: scale, bias, residual,
        activation, blend), or None for the bare convolution.  A solver sees one only in the
        problems the core gives it after its `fused_stages` said it computes that much; the
        values come with the buffers (`buffers.epilogue_args`)."""
        return self._epilogue

    def with_direction(self, direction: Direction | str) -> Problem:
        """The same convolution, without epilogue, in another direction."""
        return Problem(Direction.parse(direction), self.x, self.w, self.y, self.conv)

    def with_epilogue(self, epilogue: Epilogue | None) -> Problem:
        """The same problem whose output carries ``epilogue`` (an Epilogue; None: bare)."""
        if epilogue is None and self._epilogue is None:
            return self   # keeps the cached hash and key
        return Problem(self.direction, self.x, self.w, self.y, self.conv, epilogue)

    # }}}

    # {{{ keys and kernel defines

    def key(self) -> str:
        """Stable, readable key naming every field, e.g. 'fwd-n8-c64-h56-w56-k64-y3-x3-p1.1-q1.1-u1-v1-l1-j1-g1-float32-NCHW', and an epilogue's parts after it ('-epi.bias.relu')."""
        try:   # cached as the hash is: find and get_solutions key every call
            return self.__dict__["_key"]
        except KeyError:
            pass
        (pt, pb), (pl, pr) = self.conv.pads
        (u, v), (l, j) = self.conv.strides, self.conv.dilations
        tail = f"-{self._epilogue.key()}" if self._epilogue is not None else ""
        key = self.__dict__["_key"] = (
            f"{self.direction.value}-n{self.n}-c{self.c}-h{self.in_h}-w{self.in_w}"
            f"-k{self.k}-y{self.fil_h}-x{self.fil_w}-p{pt}.{pb}-q{pl}.{pr}"
            f"-u{u}-v{v}-l{l}-j{j}-g{self.groups}-{self.dtype}-{self.x.layout}{tail}")
        return key

    @classmethod
    def from_key(cls, key: str) -> Problem:
        """The Problem a key() string describes."""
        match = _KEY_RE.match(key.strip())
        if not match:
            raise ValidationError("problem key", key, "expected the form Problem.key() returns")
        text = match.groupdict()   # sizes as ints in f, the rest as text
        f = {name: int(v) for name, v in text.items() if v is not None and v.isdigit()}
        return cls.conv2d((f["n"], f["c"], f["h"], f["w"]), (f["k"], f["c"] // f["g"], f["y"], f["x"]),
                          stride=(f["u"], f["v"]), padding=((f["pt"], f["pb"]), (f["pl"], f["pr"])),
                          dilation=(f["l"], f["j"]), groups=f["g"], direction=text["dir"],
                          dtype=text["dtype"], epilogue=Epilogue.from_key(text["epilogue"])
                          if text["epilogue"] else None)

    def epilogue_defines(self) -> dict[str, int]:
        """The -D defines of the problem's epilogue (convsolve_epilogue.h's CS_EPI_*), none for
        the bare convolution: what a kernel that stores the output is built with."""
        return self._epilogue.defines() if self._epilogue is not None else {}

    def defines(self) -> dict[str, int]:
        """The problem's sizes as OpenCL -D defines, for solvers that compile per problem, and
        its epilogue's (epilogue_defines)."""
        (pt, pb), (pl, pr) = self.conv.pads
        return {**self.epilogue_defines(), "CS_N": self.n, "CS_C": self.c, "CS_H": self.in_h, "CS_W": self.in_w,
                "CS_K": self.k, "CS_R": self.fil_h, "CS_S": self.fil_w,
                "CS_OH": self.out_h, "CS_OW": self.out_w, "CS_GROUPS": self.groups,
                "CS_PAD_T": pt, "CS_PAD_B": pb, "CS_PAD_L": pl, "CS_PAD_R": pr,
                "CS_STRIDE_H": self.conv.strides[0], "CS_STRIDE_W": self.conv.strides[1],
                "CS_DIL_H": self.conv.dilations[0], "CS_DIL_W": self.conv.dilations[1],
                "CS_PRECISION": 8 * DTYPE_SIZES[self.dtype]}

    def kernel_args(self) -> tuple[np.int32, ...]:
        """The sizes as int32 kernel arguments, in the order of CS_CONV_PARAMS in convsolve.h."""
        (pt, _), (pl, _) = self.conv.pads
        return tuple(np.int32(v) for v in (
            self.n, self.c, self.in_h, self.in_w, self.k, self.fil_h, self.fil_w, self.out_h,
            self.out_w, self.groups, pt, pl, *self.conv.strides, *self.conv.dilations))

    # }}}

    def __str__(self) -> str:
        return self.key()
