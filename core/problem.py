"""The convolution problem: tensor and convolution descriptors, validation, shapes and cache keys."""
from __future__ import annotations

import enum
import functools
import math
import operator
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, SupportsIndex

import numpy as np

from .epilogue import Epilogue
from .errors import ValidationError

DTYPE_SIZES = {"float32": 4}  # float16 follows once a solver supports it
#: Tensor layouts by spatial rank (1, 2, 3): channels-first, then channels-last.  Weights take
#: the same names, N standing for K (MIOpen's NCHW / NHWC filters).  A shape is always given in
#: logical order (N, C, spatial...); the layout says the order in memory.
LAYOUTS = {1: ("NCW", "NWC"), 2: ("NCHW", "NHWC"), 3: ("NCDHW", "NDHWC")}
#: Every layout name, and the channels-first ones (what solvers serve unless they say more).
ALL_LAYOUTS = tuple(name for pair in LAYOUTS.values() for name in pair)
CHANNELS_FIRST = tuple(pair[0] for pair in LAYOUTS.values())
#: The spatial ranks a Problem may have.
SPATIAL_RANKS = tuple(LAYOUTS)
#: Largest size, pad, stride, dilation, group count, tensor element count and padded extent a
#: Problem admits: kernels take sizes as int arguments (CS_CONV_PARAMS, kernel_args()), index
#: elements and work-items with them, and compute window coordinates (oh * stride - pad_top +
#: r * dilation, in [-pad_top, h + pad_bottom)) in int.  Solvers with stricter needs decline in
#: is_applicable (the gemm plugin's fits_int32 also bounds its workspace by the same number).
INT32_MAX = 2 ** 31 - 1

#: A tensor's sizes, as the API takes them: a tuple or a list of ints.
Shape = tuple[int, ...] | list[int]
#: A stride, dilation or output padding: an int for every spatial dim, or one per dim ((h, w)
#: in 2-D, (d, h, w) in 3-D).
IntPair = int | tuple[int, ...] | list[int]
#: Padding: an IntPair, or one (before, after) pair per spatial dim (((top, bottom), (left,
#: right)) in 2-D).
Padding = IntPair | tuple[tuple[int, int] | list[int], ...] | list[tuple[int, int] | list[int]]
#: Per-side pads as a ConvDesc holds them, one (before, after) pair per spatial dim.
Pads = tuple[tuple[int, int], ...]
#: Names of the spatial dims, outermost first: a rank's are the last ``rank`` of these.
_DIM_NAMES = ("depth", "height", "width")


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


def _per_dim(field: str, value: IntPair, minimum: int, rank: int = 2) -> tuple[int, ...]:
    """An int, or ``rank`` ints (one per spatial dim), as a ``rank``-tuple of ints >= minimum."""
    if isinstance(value, (tuple, list)):
        if len(value) != rank:
            raise ValidationError(field, value, f"expected an int or {rank} ints (one per "
                                  f"spatial dim: {', '.join(_DIM_NAMES[-rank:])})")
        return tuple(_positive_int(field, v, minimum) for v in value)
    return (_positive_int(field, value, minimum),) * rank


def parse_padding(padding: Padding, rank: int = 2) -> Pads:
    """Padding as an int, one int per spatial dim, or one (before, after) pair per spatial dim
    (2-D: ((top, bottom), (left, right))) -> one (before, after) pair per dim."""
    if isinstance(padding, (tuple, list)) and padding and all(
            isinstance(side, (tuple, list)) for side in padding):
        if len(padding) != rank:
            raise ValidationError("padding", padding, f"expected {rank} (before, after) pairs")
        return tuple((lo, hi) for lo, hi in (_per_dim("padding", side, 0) for side in padding))
    if isinstance(padding, (tuple, list)) and any(isinstance(p, (tuple, list)) for p in padding):
        raise ValidationError("padding", padding, "expected ints or (before, after) pairs, "
                              "not both")
    # ints now (pairs returned or refused above: mypy cannot narrow by all/any)
    return tuple((p, p) for p in _per_dim("padding", padding, 0, rank))  # type: ignore[arg-type]


def split_output_padding(output_padding: IntPair, padding: IntPair = 0, stride: IntPair = 1,
                         dilation: IntPair = 1, rank: int = 2) -> tuple[tuple[int, ...], ...]:
    """A transposed convolution's output_padding (an int or one per spatial dim, smaller than
    the stride or the dilation, as PyTorch requires) as two tuples: the part its convolution
    can express, at most padding + stride - 1, and the rest, rows and columns no input reaches
    (zeros)."""
    extras = _per_dim("output_padding", output_padding, 0, rank)
    pads = _per_dim("padding", padding, 0, rank)
    strides = _per_dim("stride", stride, 1, rank)
    dilations = _per_dim("dilation", dilation, 1, rank)
    for extra, u, d in zip(extras, strides, dilations):
        if extra >= u and extra >= d:
            raise ValidationError("output_padding", output_padding,
                                  f"must be smaller than the stride {u} or the dilation {d}")
    reach = tuple(min(extra, pad + u - 1) for extra, pad, u in zip(extras, pads, strides))
    return reach, tuple(extra - r for extra, r in zip(extras, reach))


def _channels_first(rank: int) -> str:
    return LAYOUTS[rank][0] if rank in LAYOUTS else "NCHW"


#: A layout as Problem.convolution takes it: one name for x, w and y, or a mapping {"x": ...,
#: "w": ..., "y": ...} (absent tensors channels-first), or None (all channels-first).
LayoutSpec = str | Mapping[str, str] | None


def tensor_layouts(layout: LayoutSpec, rank: int) -> dict[str, str]:
    """Each tensor's layout name ({"x": ..., "w": ..., "y": ...}) from ``layout`` (LayoutSpec),
    each checked to be one of ``rank``'s."""
    if layout is None or isinstance(layout, str):
        layouts, fields = dict.fromkeys("xwy", layout or _channels_first(rank)), dict.fromkeys(
            "xwy", "layout")
    elif isinstance(layout, Mapping) and set(layout) <= set("xwy"):
        layouts = {name: layout.get(name, _channels_first(rank)) for name in "xwy"}
        fields = {name: f"layout[{name!r}]" for name in "xwy"}
    else:
        raise ValidationError("layout", layout, "expected a layout name or a mapping of 'x', "
                              "'w', 'y' to layout names")
    for name, value in layouts.items():
        if rank in LAYOUTS and value not in LAYOUTS[rank]:
            raise ValidationError(fields[name], value, f"a {rank}-D tensor's layout is one of "
                                  f"{list(LAYOUTS[rank])}")
    return layouts


@dataclass(frozen=True)
class TensorDesc:
    """A packed tensor: shape in logical order (N, C, spatial...; weights K, C/G, filter...),
    element type and layout (the order in memory: NCHW, NHWC, ...; LAYOUTS)."""

    shape: tuple[int, ...]
    dtype: str = "float32"
    layout: str = "NCHW"

    @classmethod
    def make(cls, field: str, shape: Shape, dtype: str = "float32", layout: str = "NCHW",
             allow_zero_batch: bool = True) -> TensorDesc:
        """A validated TensorDesc; ``field`` names the argument in error messages."""
        if not isinstance(dtype, str) or dtype not in DTYPE_SIZES:
            raise ValidationError(f"{field}.dtype", dtype, f"supported: {sorted(DTYPE_SIZES)}")
        if not isinstance(layout, str) or layout not in ALL_LAYOUTS:
            raise ValidationError(f"{field}.layout", layout, f"supported: {list(ALL_LAYOUTS)}")
        names = "NC" + layout.replace("N", "").replace("C", "")   # logical order
        if not isinstance(shape, (tuple, list)) or len(shape) != len(layout):
            raise ValidationError(field, shape, f"expected {len(layout)} sizes ({names}) for "
                                  f"layout {layout}")
        dims = tuple(_positive_int(f"{field}[{i}] ({names[i]})", size,
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

    @property
    def channels_last(self) -> bool:
        """Whether C is the innermost dim in memory (NWC, NHWC, NDHWC)."""
        return self.layout.endswith("C")

    @property
    def order(self) -> tuple[int, ...]:
        """The logical axes in memory order: (0, 1, 2, 3) for NCHW, (0, 2, 3, 1) for NHWC."""
        rank = len(self.shape)
        return (0, *range(2, rank), 1) if self.channels_last else tuple(range(rank))

    @property
    def memory_shape(self) -> tuple[int, ...]:
        """The shape of a C-ordered array holding the tensor: (N, H, W, C) for NHWC."""
        return tuple(self.shape[axis] for axis in self.order)

    @property
    def strides(self) -> tuple[int, ...]:
        """Element strides of the logical axes (N, C, spatial...) in the packed buffer."""
        strides, step = [0] * len(self.shape), 1
        for axis in reversed(self.order):
            strides[axis], step = step, step * self.shape[axis]
        return tuple(strides)


@dataclass(frozen=True)
class ConvDesc:
    """Convolution parameters: per-side pads, strides, dilations (one entry per spatial dim,
    outermost first), groups."""

    pads: Pads                    # ((before, after), ...): 2-D ((top, bottom), (left, right))
    strides: tuple[int, ...]      # 2-D (stride_h, stride_w)
    dilations: tuple[int, ...]    # 2-D (dilation_h, dilation_w)
    groups: int = 1


#: The key's letters per spatial dim (outermost first; a rank uses the last ``rank``): input
#: sizes, filter sizes, pads (before.after), strides, dilations.  2-D's are MIOpenDriver's flags.
_KEY_LETTERS = {"in": "dhw", "fil": "zyx", "pad": "opq", "stride": "tuv", "dil": "ilj"}
_KEY_RE = re.compile(
    r"^(?P<dir>fwd|bwd|wrw)-n(?P<n>\d+)-c(?P<c>\d+)(?:-d(?P<d>\d+))?(?:-h(?P<h>\d+))?"
    r"-w(?P<w>\d+)-k(?P<k>\d+)(?:-z(?P<z>\d+))?(?:-y(?P<y>\d+))?-x(?P<x>\d+)"
    r"(?:-o(?P<o>\d+\.\d+))?(?:-p(?P<p>\d+\.\d+))?-q(?P<q>\d+\.\d+)"
    r"(?:-t(?P<t>\d+))?(?:-u(?P<u>\d+))?-v(?P<v>\d+)(?:-i(?P<i>\d+))?(?:-l(?P<l>\d+))?"
    r"-j(?P<j>\d+)-g(?P<g>\d+)-(?P<dtype>[a-z]\w*)-(?P<layout>[A-Z]+(?:\.[A-Z]+\.[A-Z]+)?)"
    r"(?:-(?P<epilogue>epi[\w.]*))?$")


def _plane_size(tensor: str, axis: int, doc: str) -> property:
    """A 2-D problem's size ``tensor``.shape[axis]; other ranks raise (their sizes are
    in_sizes, fil_sizes, out_sizes): a 2-D solver never reads a wrong size."""
    def get(self: Problem) -> int:
        if len(self.x.shape) != 4:
            raise ValidationError("problem", self.key(), f"{doc.split(' (')[0].lower()} is a "
                                  "2-D problem's; this one's sizes are in_sizes, fil_sizes, "
                                  "out_sizes")
        return getattr(self, tensor).shape[axis]
    return property(get, doc=doc)


@dataclass(frozen=True, eq=True)
class Problem:
    """One convolution problem of spatial rank 1, 2 or 3, validated at construction; immutable
    and hashable.

    ``x``, ``w`` and ``y`` are the forward-sense tensors (input, weights, output) whatever the
    direction: backward-data computes x from y and w, backward-weights w from x and y.  Each
    has its layout (channels-first or channels-last, TensorDesc); shapes are logical.

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
    def convolution(cls, x_shape: Shape, w_shape: Shape, stride: IntPair = 1, padding: Padding = 0,
             dilation: IntPair = 1, groups: int = 1,
             direction: Direction | str = Direction.FORWARD, dtype: str = "float32",
             epilogue: Epilogue | None = None, *, layout: LayoutSpec = None,
             spatial_dims: int | None = None) -> Problem:
        """The problem of convolving ``x_shape`` (N, C, spatial...) with ``w_shape`` (K,
        C/groups, filter...), both in logical order whatever ``layout`` (one name for every
        tensor, or a mapping {"x", "w", "y"}: LAYOUTS; None: channels-first); the spatial rank
        is ``spatial_dims`` (1, 2 or 3) or x_shape's.  ``stride`` and ``dilation`` are an int or
        one per spatial dim; ``padding`` that, or a (before, after) pair per dim.  The output
        carries ``epilogue`` (a convsolve.Epilogue, any rank and layout) if given."""
        direction = Direction.parse(direction)
        rank = len(x_shape) - 2 if isinstance(x_shape, (tuple, list)) else 0
        if spatial_dims is not None and (rank != spatial_dims or rank not in SPATIAL_RANKS):
            raise ValidationError("x_shape", x_shape, f"expected {spatial_dims + 2} sizes (N, C "
                                  f"and {spatial_dims} spatial) for spatial_dims={spatial_dims}")
        if rank not in SPATIAL_RANKS:
            raise ValidationError("x_shape", x_shape, "expected 3, 4 or 5 sizes (N, C and 1, 2 "
                                  "or 3 spatial)")
        layouts = tensor_layouts(layout, rank)
        x = TensorDesc.make("x_shape", x_shape, dtype, layouts["x"])
        if not isinstance(w_shape, (tuple, list)) or len(w_shape) != rank + 2:
            raise ValidationError("w_shape", w_shape, f"expected {rank + 2} sizes (K, C/groups, "
                                  f"{rank} filter sizes), as x_shape's rank")
        w = TensorDesc.make("w_shape", w_shape, dtype, layouts["w"], allow_zero_batch=False)
        pads = parse_padding(padding, rank)
        strides = _per_dim("stride", stride, 1, rank)
        dilations = _per_dim("dilation", dilation, 1, rank)
        groups = _positive_int("groups", groups)
        (n, c, *sizes), (k, c_per_group, *filters) = x.shape, w.shape
        if c % groups:
            raise ValidationError("groups", groups, f"input channels c={c} are not divisible by it")
        if k % groups:
            raise ValidationError("groups", groups, f"output channels k={k} are not divisible by it")
        if c_per_group != c // groups:
            raise ValidationError("w_shape[1] (C)", c_per_group,
                                  f"must be c/groups = {c}/{groups} = {c // groups}")
        out = []
        for name, size, fil, (lo, hi), u, d in zip(
                _DIM_NAMES[-rank:], sizes, filters, pads, strides, dilations):
            span = (fil - 1) * d + 1
            if size + lo + hi > INT32_MAX:
                raise ValidationError(f"padded {name}", size + lo + hi,
                                      f"{size} + pads {lo} + {hi}; at most 2**31 - 1 (kernels "
                                      "compute window coordinates in 32-bit ints)")
            extent = size + lo + hi - span
            if extent < 0:
                raise ValidationError(f"output {name}", extent // u + 1,
                                      f"padded input {size + lo + hi} is smaller than the "
                                      f"dilated filter {span}; the output must be at least 1")
            out.append(extent // u + 1)
        y = TensorDesc.make("y_shape (output)", (n, k, *out), dtype, layouts["y"])
        return cls(direction, x, w, y, ConvDesc(pads, strides, dilations, groups), epilogue)

    @classmethod
    def conv1d(cls, *args: Any, **kwargs: Any) -> Problem:
        """Problem.convolution of an (N, C, W) ``x_shape`` and a (K, C/groups, S) ``w_shape``."""
        return cls.convolution(*args, **kwargs, spatial_dims=1)

    @classmethod
    def conv2d(cls, x_shape: Shape, w_shape: Shape, stride: IntPair = 1, padding: Padding = 0,
               dilation: IntPair = 1, groups: int = 1,
               direction: Direction | str = Direction.FORWARD, dtype: str = "float32",
               epilogue: Epilogue | None = None, *, layout: LayoutSpec = None) -> Problem:
        """The problem of convolving an (N, C, H, W) ``x_shape`` with a KCRS ``w_shape`` (C per
        group), its output carrying ``epilogue`` (a convsolve.Epilogue) if given
        (Problem.convolution)."""
        return cls.convolution(x_shape, w_shape, stride, padding, dilation, groups, direction,
                               dtype, epilogue, layout=layout, spatial_dims=2)

    @classmethod
    def conv3d(cls, *args: Any, **kwargs: Any) -> Problem:
        """Problem.convolution of an (N, C, D, H, W) ``x_shape`` and a (K, C/groups, Z, R, S)
        ``w_shape``."""
        return cls.convolution(*args, **kwargs, spatial_dims=3)

    @classmethod
    def conv_transpose(cls, x_shape: Shape, w_shape: Shape, stride: IntPair = 1,
                       padding: IntPair = 0, output_padding: IntPair = 0, groups: int = 1,
                       dilation: IntPair = 1, direction: Direction | str = Direction.FORWARD,
                       dtype: str = "float32", *, layout: LayoutSpec = None,
                       spatial_dims: int | None = None) -> Problem:
        """The problem that computes a transposed convolution (PyTorch's ConvTranspose1d/2d/3d,
        MIOpen's miopenTranspose) in ``direction`` as the convolution it transposes, so every
        solver serves it.

        ``x_shape`` is its input (N, C, spatial...), ``w_shape`` its weights (C_in,
        C_out/groups, filter...); ``padding``, ``stride``, ``dilation`` and ``output_padding``
        are ints or one per spatial dim, and each output size is (H-1)*stride - 2*padding +
        dilation*(kH-1) + output_padding + 1.  The Problem convolves that output (its x) with the
        weights back to the input (its y): forward maps to backward-data (input -> y, output ->
        x), backward-data to forward (dy -> x, dx -> y), backward-weights to backward-weights
        (dy -> x, input -> y).  ``layout``'s "x" is the transposed convolution's input, its "y"
        the output (the Problem's y and x).
        """
        rank = spatial_dims or (len(x_shape) - 2 if isinstance(x_shape, (tuple, list)) else 2)
        layouts = tensor_layouts(layout, rank)
        x = TensorDesc.make("x_shape", x_shape, dtype, layouts["x"])
        w = TensorDesc.make("w_shape", w_shape, dtype, layouts["w"], allow_zero_batch=False)
        strides = _per_dim("stride", stride, 1, rank)
        dilations = _per_dim("dilation", dilation, 1, rank)
        (n, c, *sizes), groups = x.shape, _positive_int("groups", groups)
        if w.shape[0] != c:
            raise ValidationError("w_shape[0] (C_in)", w.shape[0], f"must equal x_shape[1] = {c}")
        if c % groups:
            raise ValidationError("groups", groups, f"input channels {c} are not divisible by it")
        pads = _per_dim("padding", padding, 0, rank)
        out_pads, zeros = split_output_padding(output_padding, padding, strides, dilations, rank)
        if any(zeros):
            raise ValidationError("output_padding", output_padding, f"its last {zeros} rows, "
                                  f"columns get no input (zeros); a Problem takes {out_pads} at most")
        out, bottoms = [], []
        for name, size, fil, pad, extra, u, d in zip(
                _DIM_NAMES[-rank:], sizes, w.shape[2:], pads, out_pads, strides, dilations):
            out.append((size - 1) * u - 2 * pad + d * (fil - 1) + extra + 1)
            if out[-1] < 1:
                raise ValidationError(f"output {name}", out[-1], "must be at least 1")
            bottoms.append(min(pad, pad - extra + u - 1))   # the convolution's output is `size`
        forward = {Direction.FORWARD: Direction.BACKWARD_DATA, Direction.BACKWARD_DATA:
                   Direction.FORWARD}.get(Direction.parse(direction), direction)
        return cls.convolution((n, w.shape[1] * groups, *out), w.shape, strides,
                               tuple(zip(pads, bottoms)), dilations, groups, forward, dtype,
                               layout={"x": layouts["y"], "w": layouts["w"], "y": layouts["x"]},
                               spatial_dims=rank)

    @classmethod
    def conv_transpose2d(cls, *args: Any, **kwargs: Any) -> Problem:
        """Problem.conv_transpose of a 2-D (N, C, H, W) ``x_shape``."""
        return cls.conv_transpose(*args, **kwargs, spatial_dims=2)

    # {{{ derived sizes

    n = property(lambda self: self.x.shape[0], doc="Batch size.")
    c = property(lambda self: self.x.shape[1], doc="Input channels (all groups).")
    k = property(lambda self: self.w.shape[0], doc="Output channels (all groups).")
    in_h = _plane_size("x", 2, "Input height (2-D problems; in_sizes for any rank).")
    in_w = _plane_size("x", 3, "Input width (2-D problems; in_sizes for any rank).")
    fil_h = _plane_size("w", 2, "Filter height (2-D problems; fil_sizes for any rank).")
    fil_w = _plane_size("w", 3, "Filter width (2-D problems; fil_sizes for any rank).")
    out_h = _plane_size("y", 2, "Output height (2-D problems; out_sizes for any rank).")
    out_w = _plane_size("y", 3, "Output width (2-D problems; out_sizes for any rank).")
    in_sizes = property(lambda self: self.x.shape[2:], doc="Input sizes, outermost first.")
    fil_sizes = property(lambda self: self.w.shape[2:], doc="Filter sizes, outermost first.")
    out_sizes = property(lambda self: self.y.shape[2:], doc="Output sizes, outermost first.")
    spatial_dims = property(lambda self: len(self.x.shape) - 2, doc="Spatial rank: 1, 2 or 3.")
    layouts = property(lambda self: (self.x.layout, self.w.layout, self.y.layout),
                       doc="The layouts of x, w and y.")
    is_2d_nchw = property(lambda self: self.layouts == ("NCHW",) * 3,
                          doc="Whether the problem is 2-D with every tensor NCHW: the problems "
                              "of kernel_args() and defines().")
    groups = property(lambda self: self.conv.groups, doc="Group count.")
    dtype = property(lambda self: self.x.dtype, doc="Element type of all three tensors.")

    @property
    def flops(self) -> int:
        """Floating-point operations of the direct algorithm (2 per multiply-add), any direction."""
        return (2 * self.n * self.k * math.prod(self.out_sizes) * (self.c // self.groups)
                * math.prod(self.fil_sizes))

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
        """Stable, readable key naming every field, e.g. 'fwd-n8-c64-h56-w56-k64-y3-x3-p1.1-q1.1-u1-v1-l1-j1-g1-float32-NCHW', and an epilogue's parts after it ('-epi.bias.relu'); docs/architecture.md gives the letters of 1-D and 3-D problems and the layouts."""
        try:   # cached as the hash is: find and get_solutions key every call
            return self.__dict__["_key"]
        except KeyError:
            pass
        rank, conv = self.spatial_dims, self.conv

        def part(letters: str, values: tuple) -> str:
            return "".join(f"-{letter}{value}" for letter, value in zip(letters[-rank:], values))
        layouts = set(self.layouts)
        layout = self.x.layout if len(layouts) == 1 else ".".join(self.layouts)
        tail = f"-{self._epilogue.key()}" if self._epilogue is not None else ""
        key = self.__dict__["_key"] = (
            f"{self.direction.value}-n{self.n}-c{self.c}{part('dhw', self.in_sizes)}-k{self.k}"
            f"{part('zyx', self.fil_sizes)}{part('opq', tuple(f'{a}.{b}' for a, b in conv.pads))}"
            f"{part('tuv', conv.strides)}{part('ilj', conv.dilations)}-g{self.groups}"
            f"-{self.dtype}-{layout}{tail}")
        return key

    @classmethod
    def from_key(cls, key: str) -> Problem:
        """The Problem a key() string describes."""
        match = _KEY_RE.match(key.strip()) if isinstance(key, str) else None
        if not match:
            raise ValidationError("problem key", key, "expected the form Problem.key() returns")
        given = {name: value for name, value in match.groupdict().items() if value is not None}
        layouts = given["layout"].split(".")
        rank = len(layouts[0]) - 2
        letters = {what: chars[-rank:] if rank in SPATIAL_RANKS else ""
                   for what, chars in _KEY_LETTERS.items()}
        if rank not in SPATIAL_RANKS or set(given) & set("".join(_KEY_LETTERS.values())) != set(
                "".join(letters.values())):
            raise ValidationError("problem key", key, f"layout {layouts[0]} needs the letters of "
                                  f"{rank} spatial dims (docs/architecture.md)")
        f = {name: int(value) for name, value in given.items() if value.isdigit()}
        sizes = {what: tuple(f[letter] for letter in ls) for what, ls in letters.items()
                 if what != "pad"}
        pads = tuple((int(a), int(b)) for a, b in (given[p].split(".") for p in letters["pad"]))
        return cls.convolution(
            (f["n"], f["c"], *sizes["in"]), (f["k"], f["c"] // max(f["g"], 1), *sizes["fil"]),
            sizes["stride"], pads, sizes["dil"], f["g"], given["dir"], given["dtype"],
            Epilogue.from_key(given["epilogue"]) if "epilogue" in given else None,
            layout=dict(zip("xwy", layouts * 3 if len(layouts) == 1 else layouts)))

    def _kernel_problem(self) -> None:
        """Refuse what kernel_args() and defines() cannot describe: all but 2-D NCHW."""
        if not self.is_2d_nchw:
            raise ValidationError("problem", self.key(), "kernel_args() and defines() describe "
                                  "2-D NCHW problems (CS_CONV_PARAMS); use in_sizes, "
                                  "TensorDesc.strides and conv for this one")

    def epilogue_defines(self) -> dict[str, int]:
        """The -D defines of the problem's epilogue (convsolve_epilogue.h's CS_EPI_*), none for
        the bare convolution: what a kernel that stores the output is built with."""
        return self._epilogue.defines() if self._epilogue is not None else {}

    def defines(self) -> dict[str, int]:
        """The problem's sizes as OpenCL -D defines, for solvers that compile per problem, and
        its epilogue's (epilogue_defines); 2-D NCHW problems only (else ValidationError)."""
        self._kernel_problem()
        (pt, pb), (pl, pr) = self.conv.pads
        return {**self.epilogue_defines(), "CS_N": self.n, "CS_C": self.c, "CS_H": self.in_h, "CS_W": self.in_w,
                "CS_K": self.k, "CS_R": self.fil_h, "CS_S": self.fil_w,
                "CS_OH": self.out_h, "CS_OW": self.out_w, "CS_GROUPS": self.groups,
                "CS_PAD_T": pt, "CS_PAD_B": pb, "CS_PAD_L": pl, "CS_PAD_R": pr,
                "CS_STRIDE_H": self.conv.strides[0], "CS_STRIDE_W": self.conv.strides[1],
                "CS_DIL_H": self.conv.dilations[0], "CS_DIL_W": self.conv.dilations[1],
                "CS_PRECISION": 8 * DTYPE_SIZES[self.dtype]}

    def kernel_args(self) -> tuple[np.int32, ...]:
        """The sizes as int32 kernel arguments, in the order of CS_CONV_PARAMS in convsolve.h;
        2-D NCHW problems only (else ValidationError)."""
        self._kernel_problem()
        (pt, _), (pl, _) = self.conv.pads
        return tuple(np.int32(v) for v in (
            self.n, self.c, self.in_h, self.in_w, self.k, self.fil_h, self.fil_w, self.out_h,
            self.out_w, self.groups, pt, pl, *self.conv.strides, *self.conv.dilations))

    # }}}

    def __str__(self) -> str:
        return self.key()
