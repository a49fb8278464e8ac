"""SplitSum: a split reduction's parts added up as a left fold in part order (bitwise a float32
fold on the host), from an offset, continuing from the output, storing a backward epilogue and
a forward one with each element's channel; bad input refused before OpenCL."""
import numpy as np
import pyopencl as cl
import pytest
from convsolve import Activation, Epilogue, EpilogueArgs, SplitSum, ValidationError

SIZE = 1000   # not a multiple of the work-group


def _buffer(handle, array):
    flags = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
    return cl.Buffer(handle.context, flags, hostbuf=np.ascontiguousarray(array, np.float32))


def _read(handle, buffer, size):
    out = np.empty(size, np.float32)
    cl.enqueue_copy(handle.queue, out, buffer)
    return out


def _fold(parts, start=None):
    """The float32 left fold the kernel promises: (start +) parts[0] + parts[1] + ..."""
    total = parts[0].copy() if start is None else start + parts[0]
    for part in parts[1:]:
        total = total + part
    return total


def _parts(count, offset=0, seed=0):
    """``offset`` leading floats, then ``count`` parts of SIZE floats of mixed magnitudes (an
    order other than the fold's would round differently)."""
    rng = np.random.default_rng(seed)
    parts = (rng.standard_normal((count, SIZE)) * 10.0 ** rng.integers(-3, 4, (count, SIZE)))
    return np.concatenate([rng.standard_normal(offset), parts.ravel()]).astype(np.float32), \
        parts.astype(np.float32)


@pytest.mark.parametrize("count", [1, 2, 7])
@pytest.mark.parametrize("accumulate", [False, True])
def test_a_left_fold_in_part_order(handle, count, accumulate):
    """out = (out +) part 0 + part 1 + ..., bit for bit the float32 fold, from an offset; the
    floats before it and the output's neighbours past ``size`` are not touched."""
    offset = 37
    flat, parts = _parts(count, offset, seed=count)
    prior = np.random.default_rng(9).standard_normal(SIZE + 3).astype(np.float32)
    out = _buffer(handle, prior)
    summer = SplitSum(handle)
    cl.wait_for_events([summer(_buffer(handle, flat), out, count, SIZE, offset=offset,
                               accumulate=accumulate)])
    result = _read(handle, out, SIZE + 3)
    expected = _fold(parts, prior[:SIZE] if accumulate else None)
    assert np.array_equal(result[:SIZE].view(np.uint32), expected.view(np.uint32))
    assert np.array_equal(result[SIZE:], prior[SIZE:])


def test_the_epilogue_is_stored_with_the_sum(handle):
    """Built with a backward epilogue the sum is stored as alpha * sum (+ beta * out with
    blend), beta = 0 leaving the prior contents unread (NaN there stays out)."""
    flat, parts = _parts(3)
    prior = np.random.default_rng(2).standard_normal(SIZE).astype(np.float32)
    partials, total = _buffer(handle, flat), _fold(parts)
    cases = [(Epilogue(blend=True), EpilogueArgs(alpha=-1.5, beta=0.5), prior,
              np.float32(-1.5) * total + np.float32(0.5) * prior),
             (Epilogue(blend=True), EpilogueArgs(alpha=2.0, beta=0.0),
              np.full(SIZE, np.nan, np.float32), np.float32(2.0) * total),
             (Epilogue(), EpilogueArgs(alpha=0.25), prior, np.float32(0.25) * total)]
    for epilogue, values, before, expected in cases:
        out = _buffer(handle, before)
        cl.wait_for_events([SplitSum(handle, epilogue)(partials, out, 3, SIZE, values=values)])
        result = _read(handle, out, SIZE)
        assert np.allclose(result, expected, rtol=1e-6, atol=0), (epilogue, values)


@pytest.mark.parametrize("layout", ["channels-first", "channels-last"])
def test_a_forward_epilogue_takes_each_elements_channel(handle, layout):
    """A forward output of N = 2 images, K = 5 channels and 100 pixels: channels=(K, pixels)
    when channels-first, (K, 1) when channels-last; scale[k] and bias[k] reach the elements of
    channel k, then the activation."""
    images, chans, pixels = 2, 5, SIZE // 10
    flat, parts = _parts(2, seed=4)
    scale = np.linspace(0.5, 2.5, chans, dtype=np.float32)
    bias = np.linspace(-3, 3, chans, dtype=np.float32)
    if layout == "channels-first":
        channel, channels = np.arange(SIZE) // pixels % chans, (chans, pixels)
    else:
        channel, channels = np.arange(SIZE) % chans, (chans, 1)
    values = EpilogueArgs(alpha=1.0, activation=Activation("relu"),
                          scale=_buffer(handle, scale), bias=_buffer(handle, bias))
    out = _buffer(handle, np.zeros(images * chans * pixels))
    summer = SplitSum(handle, Epilogue(scale=True, bias=True, activation="relu"))
    cl.wait_for_events([summer(_buffer(handle, flat), out, 2, SIZE, values=values,
                               channels=channels)])
    expected = np.maximum(_fold(parts) * scale[channel] + bias[channel], 0)
    assert np.allclose(_read(handle, out, SIZE), expected, rtol=1e-6, atol=1e-6)


def test_a_bound_sum_is_the_call_with_its_scalars_set_once(handle):
    """bound(): bare, the host's float32 fold bit for bit; with an epilogue, the same bits as a
    call with the same arguments; call after call on fresh buffers; its scalars checked when it
    is bound."""
    flat, parts = _parts(3, offset=5, seed=8)
    prior = np.random.default_rng(3).standard_normal(SIZE).astype(np.float32)
    bias = _buffer(handle, np.linspace(-1, 1, 4))
    scalars = {"offset": 5, "accumulate": True, "channels": (4, 25)}

    def outputs(call, values):
        """call's output twice, each on fresh buffers."""
        found = []
        for _ in range(2):
            out = _buffer(handle, prior)
            cl.wait_for_events([call(_buffer(handle, flat), out, values)])
            found.append(_read(handle, out, SIZE).view(np.uint32))
        return found

    bare = outputs(SplitSum(handle).bound(3, SIZE, **scalars), None)
    assert all(np.array_equal(o, _fold(parts, prior).view(np.uint32)) for o in bare)
    fused = SplitSum(handle, Epilogue(bias=True, blend=True))
    values = EpilogueArgs(alpha=0.5, beta=2.0, bias=bias)
    called = outputs(lambda p, o, v: fused(p, o, 3, SIZE, values=v, **scalars), values)
    bound = outputs(fused.bound(3, SIZE, **scalars), values)
    assert all(np.array_equal(o, called[0]) for o in called[1:] + bound)
    with pytest.raises(ValidationError, match="split sum channel stride"):
        SplitSum(handle).bound(2, SIZE, channels=(3, 0))


def test_bad_input_is_refused_before_opencl(handle):
    """Counts, sizes and offsets out of range, values without an epilogue (or none with one),
    buffers too small or shared, and an epilogue that is not one: ValidationError naming it."""
    partials, out = _buffer(handle, np.zeros(4 * SIZE)), _buffer(handle, np.zeros(SIZE))
    bare, fused = SplitSum(handle), SplitSum(handle, Epilogue(blend=True))
    calls = [(bare, {"count": 0}, "count"), (bare, {"size": 2 ** 31}, "size"),
             (bare, {"offset": -1}, "offset"), (bare, {"count": 2.0}, "count"),
             (bare, {"values": EpilogueArgs()}, "values"), (fused, {}, "values"),
             (bare, {"count": 5}, "partials"), (bare, {"count": 1, "size": 2 * SIZE}, "out"),
             (bare, {"out": partials, "count": 2}, "out"),
             (bare, {"channels": (0, 1)}, "channels"), (bare, {"channels": (4, 0)}, "channel stride")]
    for summer, change, field in calls:
        args = {"partials": partials, "out": out, "count": 4, "size": SIZE, **change}
        with pytest.raises(ValidationError, match=f"split sum {field}"):
            summer(args.pop("partials"), args.pop("out"), args.pop("count"), args.pop("size"),
                   **args)
    with pytest.raises(ValidationError, match="epilogue"):
        SplitSum(handle, {"CS_EPI": 1})
