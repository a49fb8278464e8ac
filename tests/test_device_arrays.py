"""pyopencl Arrays wherever buffers go: find, run, plans and the numpy API take them (checked by
field before anything is enqueued), and the numpy API returns one, left on the device in queue
order without waiting."""
import threading

import convsolve
import numpy as np
import pyopencl as cl
import pyopencl.array as cl_array
import pytest
from convsolve import Direction, Epilogue, Problem, ValidationError, reference
from convsolve.device.tensors import array_buffer, pad_planes
from convsolve.testing import FLOAT32_TOLERANCE, expected_output, random_tensors

PROBLEM = Problem.conv2d((2, 3, 7, 6), (4, 3, 3, 3), padding=((1, 0), (0, 1)))
RNG = np.random.default_rng(11)
X = RNG.standard_normal((2, 3, 7, 6)).astype(np.float32)
W = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)


def _arrays(handle, host):
    return {name: cl_array.to_device(handle.queue, array) for name, array in host.items()}


def _close(got, expected):
    return reference.relative_error(got, expected) < FLOAT32_TOLERANCE


# {{{ find, run and plans

@pytest.mark.parametrize("direction", list(Direction))
def test_find_run_and_plans_take_arrays(handle, direction):
    """find, run and Plan.run take pyopencl Arrays for x, w and y in every direction, and what
    they write into the output's Array is the reference's output."""
    problem = Problem.conv2d((2, 3, 7, 6), (4, 3, 3, 3), padding=1, direction=direction)
    host = random_tensors(problem)
    arrays = _arrays(handle, host)
    found = convsolve.find(handle, problem, **arrays)
    out = problem.direction.output
    for call in (lambda: convsolve.run(handle, problem, found[0].solver, **arrays),
                 lambda: convsolve.plan(handle, problem).run(**arrays)):
        arrays[out].fill(np.float32(np.nan))
        cl.wait_for_events(call())
        assert _close(arrays[out].get(), expected_output(problem, host))


def test_epilogue_tensors_may_be_arrays(handle):
    """The epilogue's scale, bias and z may be pyopencl Arrays too (run checks and uses them)."""
    problem = PROBLEM.with_epilogue(Epilogue(scale=True, bias=True, residual=True,
                                             activation="relu"))
    host = random_tensors(problem)
    parts = {name: RNG.uniform(-1, 1, shape).astype(np.float32)
             for name, shape in (("scale", (4,)), ("bias", (4,)), ("z", problem.y.shape))}
    arrays = _arrays(handle, {**host, **parts})
    cl.wait_for_events(convsolve.run(handle, problem, "direct.NaiveFwd", **arrays))
    expected = reference.forward(PROBLEM, host["x"], host["w"]) * parts["scale"][:, None, None] \
        + parts["bias"][:, None, None] + parts["z"]
    assert _close(arrays["y"].get(), np.maximum(expected, 0))


def _bad_arrays(handle, shape):
    """(field, a bad pyopencl Array standing for a tensor of ``shape``) pairs."""
    full = np.zeros((2 * shape[0], *shape[1:]), np.float32)
    other = cl.Context([handle.device])
    wide = cl_array.zeros(handle.queue, (*shape[:-1], 2 * shape[-1]), np.float32)
    return [("dtype", cl_array.zeros(handle.queue, shape, np.float64)),
            ("shape", cl_array.zeros(handle.queue, (1, *shape), np.float32)),
            ("strides", wide[..., ::2]),
            ("offset", cl_array.to_device(handle.queue, full)[shape[0]:]),
            ("context", cl_array.zeros(cl.CommandQueue(other), shape, np.float32))]


@pytest.mark.parametrize("field", ["dtype", "shape", "strides", "offset", "context"])
def test_bad_arrays_are_refused_naming_the_field(handle, field):
    """An Array of another dtype or shape, not C-contiguous, at an offset or of another context
    is refused by run, plans, find and the numpy API with a ValidationError naming the tensor
    and the field; nothing is written."""
    arrays = _arrays(handle, random_tensors(PROBLEM))
    bad = dict(_bad_arrays(handle, PROBLEM.x.shape))[field]
    arrays["y"].fill(np.float32(7))
    name = "x" if field == "context" else f"x.{field}"
    calls = [lambda: convsolve.run(handle, PROBLEM, "direct.NaiveFwd", **{**arrays, "x": bad}),
             lambda: convsolve.plan(handle, PROBLEM).run(**{**arrays, "x": bad}),
             lambda: convsolve.find(handle, PROBLEM, **{**arrays, "x": bad})]
    if field != "shape":   # the numpy API takes the problem's shape from x
        calls.append(lambda: convsolve.conv2d(bad, arrays["w"], padding=((1, 0), (0, 1)),
                                              handle=handle))
    for call in calls:
        with pytest.raises(ValidationError) as info:
            call()
        assert info.value.field == name
    assert (arrays["y"].get() == 7).all()


def test_array_buffer_refuses_an_epilogue_array_by_name(handle):
    """A bad bias Array is refused as 'bias.<field>' (the epilogue's checks use the same one)."""
    problem = PROBLEM.with_epilogue(Epilogue(bias=True))
    arrays = _arrays(handle, random_tensors(problem))
    with pytest.raises(ValidationError, match=r"invalid bias\.shape=\(5,\)"):
        convsolve.run(handle, problem, "direct.NaiveFwd", **arrays,
                      bias=cl_array.zeros(handle.queue, (5,), np.float32))
    assert array_buffer("bias", cl_array.zeros(handle.queue, (0,), np.float32), (0,)) is None

# }}}


# {{{ the numpy API

def test_numpy_api_returns_arrays_for_arrays(handle):
    """Every numpy function given pyopencl Arrays returns a pyopencl Array on the handle's queue
    holding what it returns for the host arrays: conv2d with its epilogue, both gradients, the
    bias gradient and the transposed convolution with output padding (padded on the device)."""
    bias = RNG.standard_normal(4).astype(np.float32)
    x, w, b = (cl_array.to_device(handle.queue, a) for a in (X, W, bias))
    kw = {"padding": 1, "handle": handle}
    y = convsolve.conv2d(x, w, bias=b, activation="relu", **kw)
    y_host = convsolve.conv2d(X, W, bias=bias, activation="relu", **kw)
    assert isinstance(y, cl_array.Array) and y.queue == handle.queue
    assert np.array_equal(y.get(), y_host)
    pairs = [(convsolve.conv2d_backward_data(y, w, X.shape, **kw),
              convsolve.conv2d_backward_data(y_host, W, X.shape, **kw)),
             (convsolve.conv2d_backward_weights(y, x, W.shape, **kw),
              convsolve.conv2d_backward_weights(y_host, X, W.shape, **kw)),
             (convsolve.conv2d_backward_bias(y, handle=handle),
              convsolve.conv2d_backward_bias(y_host, handle=handle)),
             (convsolve.conv2d_backward_bias(y, beta=0.5, db=b, handle=handle),
              convsolve.conv2d_backward_bias(y_host, beta=0.5, db=bias, handle=handle)),
             (convsolve.conv_transpose2d(y, w, stride=2, padding=1, output_padding=1,
                                         handle=handle),
              convsolve.conv_transpose2d(y_host, W, stride=2, padding=1, output_padding=1,
                                         handle=handle))]
    for got, expected in pairs:
        assert isinstance(got, cl_array.Array) and got.shape == expected.shape
        assert np.array_equal(got.get(), expected)


def test_float64_is_refused_with_the_way_to_float32(handle):
    """A float64 host or device array is refused naming its dtype and the cast that serves."""
    for x in (X.astype(np.float64), cl_array.to_device(handle.queue, X.astype(np.float64))):
        with pytest.raises(ValidationError, match=r"x\.dtype='float64'.*astype\(numpy"):
            convsolve.conv2d(x, W, handle=handle)


def test_mixed_inputs_and_a_blended_prior_stay_on_the_device(handle):
    """A host weight beside a device input gives a device result; beta blends a device prior
    into a copy (the caller's prior keeps its contents)."""
    x = cl_array.to_device(handle.queue, X)
    prior_host = RNG.standard_normal((2, 4, 7, 6)).astype(np.float32)
    prior = cl_array.to_device(handle.queue, prior_host)
    y = convsolve.conv2d(x, W, padding=1, beta=0.5, y=prior, handle=handle)
    assert isinstance(y, cl_array.Array)
    expected = convsolve.conv2d(X, W, padding=1, beta=0.5, y=prior_host, handle=handle)
    assert np.array_equal(y.get(), expected) and np.array_equal(prior.get(), prior_host)


def test_zero_batch_arrays_give_arrays(handle):
    """A zero batch of device arrays gives an empty device array (zeros for weight gradients)."""
    x = cl_array.to_device(handle.queue, np.zeros((0, 3, 7, 6), np.float32))
    w = cl_array.to_device(handle.queue, W)
    y = convsolve.conv2d(x, w, padding=1, handle=handle)
    assert isinstance(y, cl_array.Array) and y.shape == (0, 4, 7, 6)
    dw = convsolve.conv2d_backward_weights(y, x, W.shape, padding=1, handle=handle)
    assert isinstance(dw, cl_array.Array) and not dw.get().any()


def test_the_numpy_api_on_arrays_waits_for_nothing_and_keeps_queue_order(handle):
    """With the problem's plan kept, conv2d on Arrays returns while its input is still being
    written on another queue (held by a user event): it enqueues, the host does not wait; once
    the write completes, the result is the convolution of what was written, not of what the
    array held before (the handle's queue waited for the array's events)."""
    x = cl_array.zeros(handle.queue, X.shape, np.float32)
    w = cl_array.to_device(handle.queue, W)
    convsolve.conv2d(x, w, padding=1, handle=handle).finish()   # find runs now, once
    gate = cl.UserEvent(handle.context)
    other = cl.CommandQueue(handle.context)
    x.queue = other
    x.add_event(cl.enqueue_copy(other, x.base_data, X, wait_for=[gate], is_blocking=False))
    done = {}
    call = threading.Thread(target=lambda: done.setdefault(
        "y", convsolve.conv2d(x, w, padding=1, handle=handle)))
    call.start()
    call.join(20)
    returned = not call.is_alive()
    gate.set_status(cl.command_execution_status.COMPLETE)
    call.join()
    assert returned, "conv2d waited for an input's pending events on the host"
    assert np.array_equal(done["y"].get(), convsolve.conv2d(X, W, padding=1, handle=handle))

# }}}


def test_pad_planes_appends_zero_rows_and_columns(handle):
    """pad_planes copies every plane into the top-left of a zeroed larger one."""
    host = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
    padded = pad_planes(cl_array.to_device(handle.queue, host), (2, 1)).get()
    assert np.array_equal(padded, np.pad(host, ((0, 0), (0, 0), (0, 2), (0, 1))))
