"""MIOpenDriver's conv command line: its flags, what convsolve does with each, lines to problems."""
import functools
import re
import shlex
from collections import namedtuple
from itertools import takewhile
from pathlib import PurePath

from ..epilogue import Epilogue
from ..errors import ValidationError
from ..problem import ALL_LAYOUTS, LAYOUTS, Direction, Problem

#: MIOpenDriver's convolution command words and their data types (MIOpen's driver/dm_conv*.cpp).
COMMANDS = {"conv": "float32", "convfp16": "float16", "convbfp16": "bfloat16",
            "convint8": "int8", "convfp8": "float8", "convbfp8": "bfloat8"}
#: convsolve's command words for a spatial rank: ``conv3d`` is ``conv --spatial_dim 3``.
RANK_COMMANDS = {"conv2d": "2", "conv3d": "3"}

_3D = "honoured with --spatial_dim 3 (or conv3d), else ignored"
_FILE = "empty only: convsolve reads no files, inputs are random (--seed)"
_CAST = "-1 only: casts are not supported (float32 only)"
_VECTOR = "vectorized tensors are not supported"
_LAYOUT = "NCHW or NHWC (NCDHW or NDHWC with --spatial_dim 3); empty: channels-first"
_LAYOUTS = ("", *ALL_LAYOUTS)
_BIAS = ("0 or 1: forward adds a bias (epilogue), the backward directions compute its "
         "gradient db (backward-bias); not with -m trans")


#: One flag of MIOpenDriver conv: names, MIOpen's default and meaning, what convsolve does with it
#: and, when not every value will do, the only values it takes (``handling`` says why).
Flag = namedtuple("Flag", "long short default meaning handling accepts",
                  defaults=("honoured", None))


#: Every flag of MIOpenDriver conv (AddCmdLineArgs in MIOpen's driver/conv_driver.hpp), in order.
FLAGS = tuple(Flag(*row) for row in (
    ("in_layout", "I", "", "input layout", _LAYOUT, _LAYOUTS),
    ("out_layout", "O", "", "output layout", _LAYOUT, _LAYOUTS),
    ("fil_layout", "f", "", "filter layout", _LAYOUT, _LAYOUTS),
    ("spatial_dim", "_", "2", "spatial dimensions", "2 or 3 (1-D: the numpy API)", ("2", "3")),
    ("forw", "F", "0", "directions: 1 fwd, 2 bwd-data, 4 bwd-weights, sums; 0 all"),
    ("batchsize", "n", "100", "batch size"),
    ("in_channels", "c", "3", "input channels"),
    ("in_d", "!", "32", "input depth", _3D),
    ("in_h", "H", "32", "input height"),
    ("in_w", "W", "32", "input width"),
    ("out_channels", "k", "32", "output channels"),
    ("fil_d", "@", "3", "filter depth", _3D),
    ("fil_h", "y", "3", "filter height"),
    ("fil_w", "x", "3", "filter width"),
    ("conv_stride_d", "#", "1", "stride of depth", _3D),
    ("conv_stride_h", "u", "1", "vertical stride"),
    ("conv_stride_w", "v", "1", "horizontal stride"),
    ("pad_d", "$", "0", "zero padding of depth", _3D),
    ("pad_h", "p", "0", "zero padding of height, both sides"),
    ("pad_w", "q", "0", "zero padding of width, both sides"),
    ("pad_val", "r", "0", "padding value", "0 only: padding is zeros", ("0",)),
    ("trans_output_pad_d", "%", "0", "output padding of depth", f"with -m trans: {_3D}"),
    ("trans_output_pad_h", "Y", "0", "output padding of height", "honoured with -m trans"),
    ("trans_output_pad_w", "X", "0", "output padding of width", "honoured with -m trans"),
    ("iter", "i", "10", "iterations (timed with -t 1)"),
    ("verify", "V", "1", "verify against a CPU reference (0 or 1)"),
    ("verification_cache", "C", "", "reference cache directory", "ignored: no cache"),
    ("time", "t", "0", "time each direction (0 or 1)"),
    ("wall", "w", "0", "wall-clock time (1), after a warm-up (2)", "ignored: profiling times"),
    ("search", "s", "0", "1: exhaustive search (find ignores the find-db, runs every solver)"),
    ("printconv", "P", "1", "print the convolution's sizes", "ignored: the report has them"),
    ("dump_output", "o", "0", "dump buffers to files", "0 only: convsolve writes no files", ("0",)),
    ("in_data", "d", "", "input data file", _FILE, ("",)),
    ("weights", "e", "", "weights file", _FILE, ("",)),
    ("bias", "b", "", "add a bias", _BIAS, ("", "0", "1")),
    ("mode", "m", "conv", "conv, or trans (transposed convolution)"),
    ("pad_mode", "z", "default", "padding: default (-p -q), same or valid"),
    ("tensor_vect", "Z", "0", "tensor vectorization", f"0 only: {_VECTOR}", ("0",)),
    ("vector_length", "L", "1", "vectorization length", f"1 only: {_VECTOR}", ("1",)),
    ("dilation_d", "^", "1", "dilation of depth", _3D),
    ("dilation_h", "l", "1", "vertical dilation"),
    ("dilation_w", "j", "1", "horizontal dilation"),
    ("in_bias", "a", "", "bias file", _FILE, ("",)),
    ("group_count", "g", "1", "groups"),
    ("dout_data", "D", "", "dy data file", _FILE, ("",)),
    ("solution", "S", "-1", "-1 find, 0 immediate mode's best, a solver (or family) name runs it",
     "honoured, but MIOpen's numeric solver ids are refused"),
    ("gpualloc", "G", "0", "allocate and fill buffers on the GPU", "ignored"),
    ("in_cast_type", "U", "-1", "cast type of the input", _CAST, ("-1",)),
    ("out_cast_type", "T", "-1", "cast type of the output", _CAST, ("-1",)),
    ("wei_cast_type", "R", "-1", "cast type of the weights", _CAST, ("-1",)),
))
_BY_NAME = {**{f"-{f.short}": f for f in FLAGS}, **{f"--{f.long}": f for f in FLAGS}}
_UPPERCASE = {"in_layout", "out_layout", "fil_layout"}   # MIOpen upper-cases their values
#: Flags MIOpen reads as integers (those with an integer default but -S and the cast types).
_INTS = {f.long for f in FLAGS if f.default.lstrip("-").isdigit()} - {
    "solution", "in_cast_type", "out_cast_type", "wei_cast_type"}
#: The values of the flags where not every value will do.
_CHOICES = {"forw": range(8), "verify": (0, 1), "time": (0, 1), "search": (0, 1),
            "mode": ("conv", "trans"), "pad_mode": ("default", "same", "valid")}
_DIRECTION_BITS = {1: Direction.FORWARD, 2: Direction.BACKWARD_DATA, 4: Direction.BACKWARD_WEIGHTS}


#: One MIOpenDriver conv command: ``problems`` (one per direction of -F) and how to run them.
#: ``requested`` holds the directions -F asked for; with -m trans (``transposed``) they are the
#: transposed convolution's, each computed by the Problem at the same index.  ``exhaustive`` is
#: -s 1, ``immediate`` -S 0, ``solver`` the name -S gives (None for a number), ``bias`` -b 1
#: (the forward problem then has a bias epilogue; the backward ones compute db too).
DriverCommand = namedtuple("DriverCommand", "problems requested transposed verify time iterations "
                           "exhaustive immediate solver bias", defaults=(False,))


def strip_driver(tokens):
    """``tokens`` after a leading MIOpenDriver (any path, and anything before it, as log lines
    have) that comes before the first flag; refuses the command words of other data types, and
    makes ``conv3d`` (``conv2d``) ``conv --spatial_dim 3`` (2).  After ``explain`` a pasted
    line's MIOpenDriver and ``conv`` go too: explain explains it."""
    tokens = list(tokens)
    if tokens[:1] != ["explain"]:
        words = [PurePath(t).name for t in takewhile(lambda t: not t.startswith("-"), tokens)]
        tokens = tokens[words.index("MIOpenDriver") + 1 if "MIOpenDriver" in words else 0:]
    if tokens and COMMANDS.get(tokens[0], "float32") != "float32":
        raise ValidationError("command", tokens[0], f"{COMMANDS[tokens[0]]} data; convsolve "
                              "supports float32 only (MIOpenDriver conv)")
    if tokens[:1] and tokens[0] in RANK_COMMANDS:   # a later -_ overrides the word's rank
        tokens = ["conv", "-_", RANK_COMMANDS[tokens[0]], *tokens[1:]]
    if tokens[:1] == ["explain"]:
        rest = strip_driver(tokens[1:])
        return ["explain", *(rest[1:] if rest[:1] == ["conv"] else rest)]
    return tokens


def _values(tokens):
    """{long name: value} of every flag (MIOpen's default unless ``tokens`` give one; ints for
    the flags in _INTS); a value convsolve cannot take raises, naming the flag as spelled."""
    values, spelled = {f.long: f.default for f in FLAGS}, {f.long: f"-{f.short}" for f in FLAGS}
    for i in range(0, len(tokens), 2):
        flag = _BY_NAME.get(tokens[i])
        if flag is None:
            raise ValidationError("flag", tokens[i], "not a flag of MIOpenDriver conv (--help)")
        if i + 1 == len(tokens):
            raise ValidationError(tokens[i], None, "the flag needs a value")
        value = tokens[i + 1].upper() if flag.long in _UPPERCASE else tokens[i + 1]
        if flag.accepts is not None and value not in flag.accepts:
            raise ValidationError(tokens[i], value, flag.handling)
        values[flag.long], spelled[flag.long] = value, tokens[i]
    for name in _INTS:
        try:
            values[name] = int(values[name])
        except ValueError:
            raise ValidationError(spelled[name], values[name], "expected an integer") from None
    for name, allowed in _CHOICES.items():
        if values[name] not in allowed:
            raise ValidationError(spelled[name], values[name], "expected " + (
                "0 (all) or a sum of 1, 2 and 4" if name == "forw" else " or ".join(map(str, allowed))))
    if values["iter"] < 1:
        raise ValidationError(spelled["iter"], values["iter"], "must be at least 1")
    if values["solution"].lstrip("-").isdigit() and int(values["solution"]) > 0:
        raise ValidationError(spelled["solution"], values["solution"], "MIOpen's numeric solver "
                              "ids are not convsolve's; give a solver name, 0 or -1")
    return values


def parse_args(tokens):
    """The DriverCommand of MIOpenDriver conv's flags ``tokens`` (the words after ``conv``)."""
    f = _values(list(tokens))
    requested = tuple(d for bit, d in _DIRECTION_BITS.items() if not f["forw"] or f["forw"] & bit)
    bias = f["bias"] == "1"
    if bias and f["mode"] == "trans":
        raise ValidationError("-b", 1, "a bias with -m trans is not supported")
    problems = tuple(_problem(f, d) for d in requested)
    if bias:
        problems = tuple(p.with_epilogue(Epilogue(bias=True)) if p.direction is
                         Direction.FORWARD else p for p in problems)
    return DriverCommand(problems, requested,
                         f["mode"] == "trans", bool(f["verify"]), bool(f["time"]), f["iter"],
                         bool(f["search"]), f["solution"] == "0",
                         None if f["solution"].lstrip("-").isdigit() else f["solution"], bias)


def _layouts(f, rank):
    """{"x", "w", "y": layout} of -I, -f and -O (empty: channels-first), checked for ``rank``;
    with -m trans -I is the transposed convolution's input and -O its output."""
    layouts = {}
    for name, flag, short in (("x", "in_layout", "-I"), ("w", "fil_layout", "-f"),
                              ("y", "out_layout", "-O")):
        layouts[name] = f[flag] or LAYOUTS[rank][0]
        if layouts[name] not in LAYOUTS[rank]:
            raise ValidationError(short, f[flag], f"with --spatial_dim {rank}: one of "
                                  f"{list(LAYOUTS[rank])} (or empty)")
    return layouts


def _problem(f, direction):
    """The Problem of the flag values ``f`` (long names) in ``direction``."""
    rank = int(f["spatial_dim"])
    dims = "dhw"[-rank:]   # the flags' suffixes of the spatial dims, outermost first

    def per_dim(flag):
        return tuple(f[f"{flag}_{d}"] for d in dims)
    g, c, k, pads = f["group_count"], f["in_channels"], f["out_channels"], per_dim("pad")
    x_shape, fil = (f["batchsize"], c, *per_dim("in")), per_dim("fil")
    stride, dilation = per_dim("conv_stride"), per_dim("dilation")
    per_group = (lambda channels: channels // g if g > 0 and channels % g == 0 else channels)
    layouts = _layouts(f, rank)
    if f["mode"] == "trans":
        return Problem.conv_transpose(
            x_shape, (c, per_group(k), *fil), stride, pads, per_dim("trans_output_pad"), g,
            dilation, direction, layout=layouts, spatial_dims=rank)
    if f["pad_mode"] != "default" and (set(dilation) == {1} or set(fil) == {1}):   # as MIOpen
        pads = tuple(max(r - (size % u or u), 0) // 2 if f["pad_mode"] == "same" else 0
                     for r, u, size in zip(fil, stride, x_shape[2:]))
    return Problem.convolution(x_shape, (k, per_group(c), *fil), stride, pads, dilation, g,
                               direction, layout=layouts, spatial_dims=rank)


def parse_line(line):
    """The DriverCommand of one command line, e.g. ``MIOpenDriver conv -n 2 -c 8 ... -F 1``, or
    of conv's flags alone (``-n 2 -c 8 ...``, as `convsolve conv` takes them); ``conv3d`` (or
    ``conv2d``) for ``conv`` sets --spatial_dim."""
    tokens = strip_driver(shlex.split(re.split(r"\s#", line)[0]))   # '#' after a space: a comment
    if tokens[:1] == ["conv"]:
        tokens = tokens[1:]
    elif not tokens or not tokens[0].startswith("-"):
        raise ValidationError("command", line.strip(), "expected MIOpenDriver conv and its "
                              "flags, or conv's flags alone")
    return parse_args(tokens)


def parse_file(path):
    """(line number, text, its DriverCommand or the ValidationError refusing it) for each line of
    the file at ``path``, leaving out blank lines and lines starting with #."""
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except (OSError, UnicodeDecodeError) as exc:   # a missing requirement: exit 2
        raise ValidationError("--file", str(path), "cannot be read: "
                              f"{getattr(exc, 'strerror', None) or exc}") from None
    return _parsed(text)


@functools.lru_cache(maxsize=2)
def _parsed(text):
    """parse_file's answer for a file holding ``text``, parsed once per content: callers get the
    same tuple, so a problem of it names its line (cli_epilogue checks a line's directions)."""
    def parse(line):
        try:
            return parse_line(line)
        except ValidationError as exc:
            return exc
    return tuple((number, line.strip(), parse(line)) for number, line in enumerate(
        text.split("\n"), 1) if line.strip() and not line.lstrip().startswith("#"))


def flags_help():
    """The flag table as text: short and long name, MIOpen's default and meaning, what convsolve
    does with it."""
    return "\n".join(f"  -{f.short} --{f.long:<19} {f.default!r:>9}  {f.meaning}"
                     f"{'' if f.handling == 'honoured' else f' [{f.handling}]'}" for f in FLAGS)
