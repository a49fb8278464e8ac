"""Fuzzing: bad sizes never reach OpenCL; every call gives a correct result or a ConvsolveError.

hypothesis draws problems (descriptors, shapes, strides, symmetric, asymmetric and huge paddings,
dilations, groups, dtypes, layouts), arrays and buffers of wrong sizes and types, and `convsolve
conv` flags, and sends them through Problem.conv2d, the numpy API, find / run and the CLI.  A
case must give the reference's result (when the problem is valid and fits the device) or a
ConvsolveError (otherwise): never another exception, a traceback, a hang or a wrong answer.
Valid problems are kept tiny (huge numbers only where the output stays small), so an example
costs milliseconds.

CI runs a fixed, repeatable set (derandomized).  ``CONVSOLVE_FUZZ_EXAMPLES=N`` runs N examples
per test instead; ``CONVSOLVE_FUZZ_PLUGINS=direct,gemm`` fuzzes more plugins than the direct one.
"""
import math
import operator

import convsolve
import numpy as np
import pyopencl as cl
import pytest
import suite_env
from convsolve import (
    ConvsolveError,
    Direction,
    Problem,
    TensorDesc,
    ValidationError,
    env,
    reference,
)
from convsolve.cli import commands as cli
from convsolve.cli import conv as cli_conv
from hypothesis import HealthCheck, event, example, given, reject, settings
from hypothesis import strategies as st

#: What kernels take as sizes and index with (the rule Problem.conv2d enforces).
INT32_MAX = 2 ** 31 - 1
EXAMPLES = env.integer(suite_env.FUZZ_EXAMPLES, minimum=0)
PLUGINS = suite_env.FUZZ_PLUGINS.raw()

#: A valid problem is run only when each tensor has at most this many elements (cheap to run
#: and to check); larger valid ones are rejected as examples, never called.
CHEAP_ELEMENTS = 4096
CHEAP_FLOPS = 4_000_000
#: The padded input the full reference (and the CLI's -V 1) allocates, in elements.
CHEAP_PADDED = 1 << 16
TOLERANCE = 1e-5

HUGE = [2 ** 31 - 1, 2 ** 31, 2 ** 32 + 3, 2 ** 63, 10 ** 30, 2 ** 30, 46341, 65537, 20000, 8193]
JUNK = [None, 1.5, "3", True, (), (1, 2, 3), [1], float("nan"), b"1", {"h": 1}]
DIRECTIONS = ["forward", "backward-data", "backward-weights"]
NAIVE = {"forward": "direct.NaiveFwd", "backward-data": "direct.NaiveBwdData",
         "backward-weights": "direct.NaiveBwdWeights"}
#: Solvers of other plugins that cases name (they may decline a problem: a SolverError).
OTHERS = ["gemm.Gemm1x1", "gemm.Im2ColGemm", "gemm.GemmWrwSplitK"] if "gemm" in PLUGINS else []


def solver_must_run(solver, direction):
    """True when ``solver`` must compute a valid problem of ``direction``, False when it must be
    refused, None when either is right (a family not yet ranked, a solver that may decline)."""
    if solver == NAIVE[direction]:
        return True
    return None if solver == "direct" or solver in OTHERS else False


def fuzz(default):
    """hypothesis settings: ``default`` examples (CONVSOLVE_FUZZ_EXAMPLES overrides), no deadline,
    derandomized so CI repeats itself."""
    return settings(max_examples=EXAMPLES or default, deadline=None, derandomize=True,
                    database=None, print_blob=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow, HealthCheck.filter_too_much,
                                           HealthCheck.data_too_large])


@pytest.fixture(autouse=True)
def fuzzed_plugins(only_naive_solvers, monkeypatch):
    """The plugins CONVSOLVE_FUZZ_PLUGINS names (the direct one alone by default)."""
    monkeypatch.setenv("CONVSOLVE_PLUGINS", PLUGINS)


# {{{ strategies

bad_value = st.one_of(st.sampled_from(HUGE), st.integers(-2 ** 40, 0), st.integers(0, 9),
                      st.sampled_from(JUNK),
                      st.sampled_from([v for v in HUGE if v < 2 ** 63]).map(np.int64))


@st.composite
def valid_args(draw):
    """Problem.conv2d keyword arguments of a tiny valid problem, in one of the accepted forms."""
    groups = draw(st.sampled_from([1, 1, 1, 2, 3]))
    cpg, kpg = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    fil = [draw(st.integers(1, 3)) for _ in range(2)]
    dil = [draw(st.integers(1, 3)) for _ in range(2)]
    pads = [(draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in range(2)]
    sizes = [max(1, (f - 1) * d + 1 - lo - hi + draw(st.integers(0, 4)))
             for f, d, (lo, hi) in zip(fil, dil, pads)]
    stride = [draw(st.integers(1, 3)) for _ in range(2)]
    form = draw(st.sampled_from(["int", "pair", "sides"]))
    if form == "int" or (form == "pair" and pads[0][0] == pads[0][1] and pads[1][0] == pads[1][1]):
        padding = pads[0][0] if form == "int" else (pads[0][0], pads[1][0])
        pads = [(padding, padding)] * 2 if form == "int" else pads
        if form == "int":
            sizes = [max(s, (f - 1) * d + 1 - 2 * padding) for s, f, d in zip(sizes, fil, dil)]
    else:
        padding = tuple(pads)
    return {"x_shape": [draw(st.sampled_from([1, 1, 1, 2, 0])), groups * cpg, *sizes],
            "w_shape": [groups * kpg, cpg, *fil],
            "stride": tuple(stride) if draw(st.booleans()) else stride[0],
            "padding": padding,
            "dilation": tuple(dil) if draw(st.booleans()) else dil[0],
            "groups": groups, "dtype": "float32",
            "direction": draw(st.sampled_from(DIRECTIONS))}


@st.composite
def far_axis(draw, args):
    """``args`` with one axis made of huge numbers whose output stays small: a huge stride or
    dilation balanced by huge padding."""
    axis = draw(st.integers(0, 1))
    big = draw(st.sampled_from([2 ** 20, 10 ** 9, 2 ** 30, 2 ** 31 - 2, 2 ** 31 - 1, 2 ** 31]))
    fil = args["w_shape"][2 + axis]
    size = args["x_shape"][2 + axis]
    stride = [*_pair_of(args["stride"])]
    dilation = [*_pair_of(args["dilation"])]
    pads = [list(p) for p in _sides_of(args["padding"])]
    if draw(st.booleans()) and fil > 1:
        dilation[axis] = big
        span = (fil - 1) * big + 1
    else:
        stride[axis] = big
        span = (fil - 1) * dilation[axis] + 1 + big * draw(st.integers(0, 2))
    total = max(0, span - size + draw(st.integers(-1, 2)))
    top = draw(st.integers(0, total))
    pads[axis] = [top, total - top]
    return {**args, "stride": tuple(stride), "dilation": tuple(dilation),
            "padding": tuple(map(tuple, pads))}


def _pair_of(value):
    return tuple(value) if isinstance(value, (tuple, list)) else (value, value)


def _sides_of(padding):
    if isinstance(padding, (tuple, list)) and isinstance(padding[0], (tuple, list)):
        return padding
    pad_h, pad_w = _pair_of(padding)
    return ((pad_h, pad_h), (pad_w, pad_w))


@st.composite
def mutated(draw, args):
    """``args`` with one field made wrong, huge, junk or just different."""
    field = draw(st.sampled_from(["x_shape", "w_shape", "stride", "padding", "dilation",
                                  "groups", "dtype", "direction"]))
    args = {**args, **{name: list(args[name]) for name in ("x_shape", "w_shape")
                       if isinstance(args[name], (tuple, list))}}
    value = draw(bad_value)
    if field in ("x_shape", "w_shape"):
        how = draw(st.sampled_from(["dim", "dim", "rank", "junk"]))
        if how == "dim" and isinstance(args[field], list) and args[field]:
            args[field][draw(st.integers(0, len(args[field]) - 1))] = value
        elif how == "rank" and isinstance(args[field], list):
            args[field] = args[field][:draw(st.integers(0, 3))] or [1, 1, 1, 1, 1]
        else:
            args[field] = draw(st.sampled_from([None, 7, "1,1,1,1", np.ones(4, int), (1.0,) * 4]))
    elif field == "padding":
        form = draw(st.sampled_from(["int", "pair", "sides", "ragged"]))
        args[field] = {"int": value, "pair": (value, 1), "sides": ((0, value), (1, 0)),
                       "ragged": ((1, 2), value)}[form]
    elif field in ("stride", "dilation"):
        args[field] = draw(st.sampled_from([value, (1, value), (value, value)]))
    elif field == "dtype":
        args[field] = draw(st.sampled_from(["float16", "float64", "int8", "", None, ["float32"],
                                            np.float32, 4]))
    elif field == "direction":
        args[field] = draw(st.sampled_from(["sideways", 0, None, Direction.FORWARD, "wrw", "bwd"]))
    else:
        args[field] = value
    return args


@st.composite
def over_device(draw, args):
    """``args`` with one image and filter but an output of about a device's largest buffer:
    padding p makes (h + 2p - span + 1)^2 floats, from 0.27 to 6.4 GB."""
    pad = draw(st.sampled_from([8192, 8193, 11585, 11586, 16384, 20000]))
    x_shape = [1, args["groups"], *args["x_shape"][2:]]
    w_shape = [args["groups"], 1, *args["w_shape"][2:]]
    return {**args, "x_shape": x_shape, "w_shape": w_shape, "padding": pad, "stride": 1}


@st.composite
def problem_args(draw, mutations=(0, 0, 0, 0, 1, 1, 2, 3)):
    """Problem.conv2d arguments: tiny and valid, with huge-but-balanced axes, with an output
    about a device's limit, or with 1 to 3 fields made wrong (as many as ``mutations`` says)."""
    args = draw(valid_args())
    shape = draw(st.integers(0, 9))
    if shape < 2:
        args = draw(far_axis(args))
    elif shape == 2:
        args = draw(over_device(args))
    for _ in range(draw(st.sampled_from(mutations))):
        args = draw(mutated(args))
    return args


def make_problem(args):
    """The Problem ``args`` describe, or the ValidationError it raises (nothing else may escape)."""
    args = dict(args)
    try:
        return Problem.conv2d(args.pop("x_shape"), args.pop("w_shape"), **args)
    except ValidationError as exc:
        assert isinstance(exc, ValueError) and exc.field
        return exc

# }}}


# {{{ oracle helpers

def fits_device(handle, problem):
    """Whether find and run may be asked to compute ``problem`` on ``handle``'s device."""
    device = handle.device
    sizes = [problem.x.nbytes, problem.w.nbytes, problem.y.nbytes]
    return max(sizes) <= device.max_mem_alloc_size and sum(sizes) <= device.global_mem_size


def cheap(problem):
    """Whether running and checking ``problem`` costs milliseconds."""
    return (max(problem.x.size, problem.w.size, problem.y.size) <= CHEAP_ELEMENTS
            and problem.flops <= CHEAP_FLOPS)


def padded_size(problem):
    (pt, pb), (pl, pr) = problem.conv.pads
    return problem.n * problem.c * (problem.in_h + pt + pb) * (problem.in_w + pl + pr)


def expected_output(problem, host):
    """The reference output: the whole padded reference when that is small, else element-wise."""
    if padded_size(problem) <= CHEAP_PADDED:
        return reference.compute(problem, host.get("x"), host.get("w"), host.get("y"))
    out = getattr(problem, problem.direction.output)
    index = np.arange(out.size)
    return reference.compute_at(problem, host.get("x"), host.get("w"), host.get("y"),
                                index).reshape(out.shape)


def assert_correct(problem, result, host):
    expected = expected_output(problem, host)
    assert result.shape == expected.shape
    error = reference.relative_error(result, expected)
    assert error < TOLERANCE, f"wrong answer for {problem.key()}: relative error {error:.3g}"


def random_array(rng, shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)

# }}}


# {{{ Problem.conv2d and the descriptors

@fuzz(400)
@given(args=problem_args())
@example(args={"x_shape": (1, 1, 1, 1), "w_shape": (1, 1, 1, 1), "stride": 2 ** 31})
@example(args={"x_shape": (1, 1, 1, 1), "w_shape": (1, 1, 1, 1), "padding": 20000})
@example(args={"x_shape": (1, 1, 2 ** 31 - 1, 1), "w_shape": (1, 1, 1, 1), "padding": (1, 0)})
def test_fuzz_problem_is_valid_for_kernels_or_refused(args):
    """Problem.conv2d gives a problem whose every kernel argument, element count and padded
    extent fits a 32-bit int, with the documented output size, or a ValidationError."""
    problem = make_problem(args)
    if isinstance(problem, ValidationError):
        return
    args = [int(a) for a in problem.kernel_args()]          # np.int32 refuses what overflows
    assert all(0 <= a <= INT32_MAX for a in args)
    assert max(problem.x.size, problem.w.size, problem.y.size) <= INT32_MAX
    for size, fil, (lo, hi), u, d, out in zip(
            (problem.in_h, problem.in_w), (problem.fil_h, problem.fil_w), problem.conv.pads,
            problem.conv.strides, problem.conv.dilations, (problem.out_h, problem.out_w)):
        assert size + lo + hi <= INT32_MAX and hi <= INT32_MAX
        assert out == (size + lo + hi - (fil - 1) * d - 1) // u + 1 >= 1
    assert Problem.from_key(problem.key()) == problem
    assert hash(problem.with_direction("fwd")) == hash(problem.with_direction(Direction.FORWARD))


@fuzz(200)
@given(shape=st.one_of(st.lists(st.one_of(st.integers(-2, 3), st.sampled_from(HUGE)),
                                max_size=5), st.sampled_from(JUNK)),
       dtype=st.sampled_from(["float32", "float16", "float64", None, ["float32"], {}, 1]),
       layout=st.sampled_from(["NCHW", "NHWC", "", None, ["NCHW"], 4, "NC"]))
def test_fuzz_tensor_descriptors(shape, dtype, layout):
    """TensorDesc.make refuses any dtype, layout or shape it does not support by name."""
    try:
        desc = TensorDesc.make("t", shape, dtype, layout)
    except ValidationError as exc:
        assert exc.field.startswith("t")
        return
    assert desc.size <= INT32_MAX and desc.nbytes == 4 * desc.size

# }}}


# {{{ the numpy API

@st.composite
def host_array(draw, rng, shape):
    """An argument for an array parameter: mostly a float32 array of ``shape`` in some memory
    layout, sometimes another dtype, shape or type."""
    kind = draw(st.sampled_from(["C", "C", "F", "strided", "reversed"]))
    if draw(st.integers(0, 9)) == 0:
        kind = draw(st.sampled_from(["list", "dtype", "shape", "junk", "ragged"]))
    if kind == "junk":
        return draw(st.sampled_from([None, "x", 3.0, object(), {"x": 1}]))
    if kind == "ragged":
        return [[1.0, 2.0], [3.0]]
    if kind == "shape":
        shape = [draw(st.integers(0, 3)) for _ in range(draw(st.sampled_from([0, 3, 4, 4, 5])))]
    array = random_array(rng, shape)
    if kind == "F":
        return np.asfortranarray(array)
    if kind == "strided":
        return np.repeat(array, 2, axis=-1)[..., ::2] if array.ndim else array
    if kind == "reversed":
        return np.ascontiguousarray(array[..., ::-1])[..., ::-1] if array.ndim else array
    if kind == "list":
        return array.tolist()
    if kind == "dtype":
        return array.astype(draw(st.sampled_from([np.float64, np.float16, np.int32, np.bool_,
                                                   np.complex64])))
    return array


def _small_shape(shape, fallback=(1, 1, 2, 2)):
    """``shape`` when it is a small array shape, else ``fallback``."""
    try:
        dims = tuple(operator.index(d) for d in shape)
    except TypeError:
        return fallback
    if any(d < 0 for d in dims) or int(np.prod(dims, dtype=object)) > CHEAP_ELEMENTS:
        return fallback
    return dims


#: Which arrays each numpy-API function takes (forward-sense names), and its shape argument.
NUMPY_CALLS = {"forward": ("conv2d", "xw", None),
               "backward-data": ("conv2d_backward_data", "yw", "x_shape"),
               "backward-weights": ("conv2d_backward_weights", "yx", "w_shape")}


@fuzz(200)
@given(args=problem_args(), data=st.data())
@example(args={"x_shape": (1, 1, 1, 1), "w_shape": (1, 1, 1, 1), "padding": 20000,
               "direction": "forward"}, data=None)
def test_fuzz_numpy_api(handle, args, data):
    """conv2d and its gradients give the reference's result or a ConvsolveError, whatever the
    arrays (dtype, shape, memory layout, type), sizes and solver."""
    rng = np.random.default_rng(0)
    direction = args["direction"] if args.get("direction") in DIRECTIONS else "forward"
    function, arrays, shape_arg = NUMPY_CALLS[direction]
    host = {"x": random_array(rng, _small_shape(args["x_shape"])),
            "w": random_array(rng, _small_shape(args["w_shape"]))}
    solver = None
    if data is not None:
        host = {name: data.draw(host_array(rng, array.shape), label=name)
                for name, array in host.items()}
        solver = data.draw(st.sampled_from([None, None, NAIVE[direction], "direct.NaiveFwd",
                                            "direct", "nonsense", 3, *OTHERS]), label="solver")
    inputs_ok = all(isinstance(host[name], np.ndarray) and host[name].dtype == np.float32
                    for name in arrays.replace("y", ""))
    kwargs = {key: args[key] for key in ("stride", "padding", "dilation", "groups") if key in args}
    shapes = {name: args[f"{name}_shape"] if name in (shape_arg or "")[:1]
              else getattr(host[name], "shape", None) for name in "xw"}
    problem = make_problem({**kwargs, "direction": direction, "x_shape": shapes["x"],
                            "w_shape": shapes["w"]}) if inputs_ok else None
    if isinstance(problem, Problem) and problem.y.size <= CHEAP_ELEMENTS:
        dy_shape = problem.y.shape
    else:
        dy_shape = (1, 1, 2, 2)
    host["y"] = random_array(rng, dy_shape) if data is None else data.draw(
        host_array(rng, dy_shape), label="dy")
    # what must happen: True a result, False an error, None either
    ok = (inputs_ok and isinstance(problem, Problem)
          and (direction == "forward" or (isinstance(host["y"], np.ndarray)
                                          and host["y"].dtype == np.float32
                                          and host["y"].shape == problem.y.shape)))
    if ok and problem.n and not fits_device(handle, problem):
        ok = False
    out = getattr(problem, problem.direction.output) if ok else None
    if ok and (not cheap(problem) or out.size > CHEAP_ELEMENTS):
        reject()   # valid and large: slow to run and to check
    if ok and problem.n == 0 and isinstance(solver, str):
        ok = None   # nothing runs: the zero-batch shortcut does not look the solver up
    elif ok and solver is not None:
        ok = solver_must_run(solver, direction)
    call_arrays = [host[name] for name in arrays]
    if shape_arg:
        call_arrays.append(args[shape_arg])
    try:
        result = getattr(convsolve, function)(*call_arrays, **kwargs, solver=solver,
                                              handle=handle)
    except ConvsolveError as exc:
        event(f"refused: {type(exc).__name__} {getattr(exc, 'field', '')}".rstrip())
        assert ok is not True, f"{problem} is valid, yet: {exc!r}"
        return
    event("computed" if problem.n else "zero batch")
    assert ok is not False, f"accepted {function}{tuple(call_arrays)!r:.300} {kwargs}"
    if problem.n == 0:
        assert result.shape == out.shape and not result.any()
        return
    assert_correct(problem, result, {name: host[name] for name in arrays})

# }}}


# {{{ find and run on device buffers

BUFFER_PLANS = ["long", "short", "none", "numpy", "int", "alias"]
#: Buffers the fuzz allocates at most; larger tensors get a 4-byte buffer (a size error).
CHEAP_BYTES = 4 * CHEAP_ELEMENTS


def _buffer(handle, plan, nbytes, host=None):
    """A buffer (or not) for a tensor of ``nbytes`` bytes, as ``plan`` says."""
    flags = cl.mem_flags.READ_WRITE
    if plan == "none" or (plan == "exact" and nbytes == 0):
        return None
    if plan == "numpy":
        return np.zeros(max(nbytes // 4, 1), np.float32)
    if plan == "int":
        return nbytes
    size = {"exact": nbytes, "long": nbytes + 64, "short": nbytes - 4}[plan]
    if size <= 0:
        return None
    if nbytes > CHEAP_BYTES:
        return cl.Buffer(handle.context, flags, 4)
    buffer = cl.Buffer(handle.context, flags, size)
    if host is not None:
        cl.enqueue_copy(handle.queue, buffer, host.reshape(-1)[:size // 4])
    else:
        cl.enqueue_fill_buffer(handle.queue, buffer, np.float32(np.nan), 0, size)
    return buffer


def _read(handle, buffer, desc):
    out = np.empty(desc.shape, np.float32)
    if out.size:
        cl.enqueue_copy(handle.queue, out, buffer)
    return out


@fuzz(200)
@given(args=problem_args(mutations=(0, 0, 0, 0, 0, 1, 2)), data=st.data())
def test_fuzz_find_and_run(handle, args, data):
    """find and run on pyopencl buffers give the reference's result or a ConvsolveError, whatever
    the problem, the buffers (missing, short, of another type, the output aliasing an input), the
    solver, the mode, the request count and the scratch."""
    problem = make_problem(args)
    if isinstance(problem, ValidationError):
        event("refused: invalid problem")
        return
    rng = np.random.default_rng(0)
    out_name = problem.direction.output
    host = {name: random_array(rng, getattr(problem, name).shape) if getattr(
        problem, name).size <= CHEAP_ELEMENTS else None for name in "xwy"}
    plans = dict.fromkeys("xwy", "exact")
    if data.draw(st.integers(0, 2)) == 0:
        plan = data.draw(st.sampled_from(BUFFER_PLANS), label="buffer plan")
        plans[out_name if plan == "alias" else data.draw(st.sampled_from("xwy"))] = plan
    buffers = {name: _buffer(handle, "exact" if plans[name] == "alias" else plans[name],
                             getattr(problem, name).nbytes,
                             None if name == out_name else host[name]) for name in "xwy"}
    if plans[out_name] == "alias":
        buffers[out_name] = buffers[data.draw(st.sampled_from(
            [name for name in "xwy" if name != out_name]), label="aliased input")]
    sizes_ok = all((buffer is None and getattr(problem, name).nbytes == 0) or (
        isinstance(buffer, cl.Buffer) and buffer.size >= getattr(problem, name).nbytes)
        for name, buffer in buffers.items()) and (plans[out_name] != "alias"
                                                  or buffers[out_name] is None)
    ok = sizes_ok and all(host[name] is not None for name in "xwy") and cheap(problem)
    scratch_plan = data.draw(st.sampled_from([None, None, None, "buffer", "numpy"]),
                             label="scratch")
    scratch = {None: None, "numpy": np.zeros(4, np.float32),
               "buffer": cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, 256)}[scratch_plan]
    if scratch_plan == "numpy":   # refused, unless nothing runs (a zero batch ignores it)
        ok = ok and (None if problem.n == 0 else False)
    if data.draw(st.booleans(), label="find"):
        request_count = data.draw(st.sampled_from([None, None, None, 1, 2]), label="count")
        mode = data.draw(st.sampled_from([None, None, "NORMAL", "FAST", "HYBRID", 3,
                                          "DYNAMIC_HYBRID"]), label="mode")
        if data.draw(st.integers(0, 7)) == 0:
            request_count, mode = data.draw(st.sampled_from(
                [(0, None), (-1, None), (True, None), (1.5, None), ("2", None),
                 (None, "bogus"), (None, 9), (None, 4.0)]), label="bad count or mode")
        ok = (ok and (request_count is None or (type(request_count) is int and request_count > 0))
              and mode not in ("bogus", 9, 4.0))
        exhaustive = data.draw(st.booleans(), label="exhaustive")

        def call():
            found = convsolve.find(handle, problem, **buffers, scratch=scratch,
                                   request_count=request_count, mode=mode, exhaustive=exhaustive)
            assert len(found) <= (request_count or len(found))
            assert found or problem.n == 0
            have = scratch.size if isinstance(scratch, cl.Buffer) else None
            assert all(have is None or s.workspace <= have for s in found)   # db hits too
            chosen = ([s.solver for s in found] or [NAIVE[DIRECTIONS[list(
                Direction).index(problem.direction)]]])[0]
            return convsolve.run(handle, problem, chosen, **buffers, scratch=scratch)
    else:
        direction = DIRECTIONS[list(Direction).index(problem.direction)]
        solver = data.draw(st.sampled_from([NAIVE[direction]] * 6 + [
            "direct", "direct.NaiveFwd", "nonsense", None, 7, *OTHERS]), label="solver")
        ok = ok and solver_must_run(solver, direction)

        def call():
            return convsolve.run(handle, problem, solver, **buffers, scratch=scratch)
    try:
        call()
        handle.queue.finish()
    except ConvsolveError as exc:
        event(f"refused: {type(exc).__name__} {getattr(exc, 'field', '')}".rstrip())
        assert ok is not True, f"{problem.key()} with {plans} is valid, yet: {exc!r}"
        return
    event("computed" if problem.n else "zero batch")
    assert ok is not False, f"accepted {problem.key()} with buffers {plans}, scratch {scratch}"
    assert_correct(problem, _read(handle, buffers[out_name], getattr(problem, out_name)), host)

# }}}


# {{{ the convsolve command

def test_cli_refuses_host_tensors_too_big_with_one_line(capsys):
    """`convsolve conv -n 4096 -c 512 -H 224 -W 224 -k 64 -y 3 -x 3` exits 2 with one line on
    stderr (it was an _ArrayMemoryError traceback from making the host tensors)."""
    argv = ["conv", "-n", "4096", "-c", "512", "-H", "224", "-W", "224", "-k", "64", "-y", "3",
            "-x", "3"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("convsolve: error: invalid x_shape=")


def test_cli_checks_the_device_before_making_host_tensors(monkeypatch, capsys):
    """A problem valid for the kernels but too large for the device is refused (exit 2, one line
    naming the device's limit) before any host tensor is made."""
    limit = convsolve.Handle().device.max_mem_alloc_size
    pad = (math.isqrt(limit // 4) + 1) // 2      # output (2 pad + 1)^2 floats: over the limit
    if (2 * pad + 1) ** 2 > INT32_MAX:
        pytest.skip("every tensor a Problem admits fits this device's largest buffer")

    def no_host_tensors(*args):
        raise AssertionError("host tensors were made")
    monkeypatch.setattr(cli_conv, "random_tensors", no_host_tensors)
    argv = f"conv -n 1 -c 1 -H 1 -W 1 -k 1 -y 1 -x 1 -p {pad} -q {pad} -F 1".split()
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "y bytes=" in err and f"{limit} bytes" in err

# }}}


CLI_JUNK = ["1.5", "x", "", "0x10", "1e3", "--", "-"]
CLI_DIRECTIONS = {1: "forward", 2: "backward-data", 4: "backward-weights"}


@st.composite
def conv_flags(draw):
    """`convsolve conv` arguments (as the command line's strings) and the same numbers as a dict."""
    args = draw(valid_args())
    if draw(st.integers(0, 4)) == 0:
        args = draw(far_axis(args))
    (n, c, h, w), (k, _, r, s) = args["x_shape"], args["w_shape"]
    (pt, _), (pl, _) = _sides_of(args["padding"])
    (u, v), (dh, dw) = _pair_of(args["stride"]), _pair_of(args["dilation"])
    numbers = {"-n": n, "-c": c, "-H": h, "-W": w, "-k": k, "-y": r, "-x": s, "-p": pt, "-q": pl,
               "-u": u, "-v": v, "-l": dh, "-j": dw, "-g": args["groups"],
               "-F": draw(st.sampled_from([1, 2, 4, 0, 3, 5, 6, 7]))}
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 1, 2]))):
        flag = draw(st.sampled_from(sorted(numbers)))
        numbers[flag] = draw(st.one_of(st.sampled_from(HUGE), st.integers(-2 ** 40, 0),
                                       st.integers(0, 9), st.sampled_from(CLI_JUNK),
                                       st.sampled_from([8, 9, -1, 16])))
    options = {"-t": draw(st.sampled_from(["0", "0", "1"])), "-i": draw(st.sampled_from("12")),
               "--select": draw(st.sampled_from(["find", "find", "immediate"])),
               "--solver": draw(st.sampled_from([None] * 6 + ["direct", "direct.NaiveFwd"])),
               "--seed": draw(st.sampled_from(["0", "3", str(2 ** 40)])),
               "--json": draw(st.booleans())}
    if draw(st.integers(0, 5)) == 0:   # one bad option
        flag, value = draw(st.sampled_from([("-i", "0"), ("-i", "-3"), ("-i", "x"), ("-t", "2"),
                                            ("--select", "other"), ("--solver", "nonsense"),
                                            ("--solver", ""), ("--seed", "x")]))
        options[flag] = value
    return numbers, options


def _cli_problems(numbers):
    """The problems `convsolve conv` makes of ``numbers`` (as it does), or a ValidationError."""
    if any(not isinstance(v, int) for v in numbers.values()):
        return ValidationError("flag", numbers, "not an integer")
    forw = numbers["-F"]
    if forw < 0 or forw > 7:
        return ValidationError("-F", forw, "")
    g, c = numbers["-g"], numbers["-c"]
    per_group = c // g if g > 0 and c % g == 0 else c
    problems = [make_problem({
        "x_shape": (numbers["-n"], c, numbers["-H"], numbers["-W"]),
        "w_shape": (numbers["-k"], per_group, numbers["-y"], numbers["-x"]),
        "stride": (numbers["-u"], numbers["-v"]), "padding": (numbers["-p"], numbers["-q"]),
        "dilation": (numbers["-l"], numbers["-j"]), "groups": g,
        "direction": CLI_DIRECTIONS[bit]}) for bit in (1, 2, 4) if not forw or forw & bit]
    errors = [p for p in problems if isinstance(p, ValidationError)]
    return errors[0] if errors else problems


@fuzz(80)
@given(flags=conv_flags())
@example(flags=({"-n": 4096, "-c": 512, "-H": 224, "-W": 224, "-k": 64, "-y": 3, "-x": 3,
                 "-p": 0, "-q": 0, "-u": 1, "-v": 1, "-l": 1, "-j": 1, "-g": 1, "-F": 0},
                {"-t": "0", "-i": "1", "--select": "find", "--solver": None, "--seed": "0",
                 "--json": False}))
def test_fuzz_cli_conv(capsys, handle, flags):
    """`convsolve conv` with random flags verifies OK, or exits 2 (a bad argument) or 1 (no
    solver) with one line on stderr: never a traceback or a failed verification."""
    numbers, options = flags
    problems = _cli_problems(numbers)
    valid = isinstance(problems, list) and all(p.n == 0 or fits_device(handle, p)
                                               for p in problems)
    if valid and not all(cheap(p) for p in problems):
        reject()   # valid and large: slow to run and to verify
    verify = valid and all(padded_size(p) <= CHEAP_PADDED for p in problems)
    argv = ["conv", *[str(a) for flag, value in numbers.items() for a in (flag, value)],
            "-V", "1" if verify else "0"]
    for flag, value in options.items():
        if flag == "--json":
            argv += [flag] if value else []
        elif value is not None:
            argv += [flag, value]
    try:
        code = cli.main(argv)
    except SystemExit as exc:   # argparse: a value that is not a number or a choice
        event("argparse error")
        assert exc.code == 2
        assert "error:" in capsys.readouterr().err
        return
    out, err = capsys.readouterr()
    event(f"exit {code}")
    assert code in (0, 1, 2), argv
    assert "FAILED" not in out, f"wrong answer: {argv}\n{out}"
    if code:
        assert err.count("\n") == 1 and err.startswith("convsolve: error: "), (argv, err)
    solver = options["--solver"] or None   # an empty --solver is no solver
    refused = options["-i"] in ("0", "-3", "x") or options["-t"] == "2"   # MIOpenDriver flags
    ok = valid and not refused and solver in (None, "direct", "direct.NaiveFwd")
    if valid and solver == "direct.NaiveFwd" and any(
            p.direction is not Direction.FORWARD for p in problems):
        ok = ok and None   # a solver of another direction: exit 1
    if ok:
        assert code == 0, (argv, err)
        if verify and not options["--json"]:
            assert out.count("Verifies OK") == sum(p.n > 0 for p in problems), out
    elif ok is False:
        assert code == 2 or (code == 1 and isinstance(problems, list)), (argv, err)
