"""run and its checks: arguments and buffers refused by name, device limits, solvers resolved by
name or family (or refused saying why), events and the reference's output, zero batches, the
resolution kept in the handle."""
import copy
import types

import convsolve
import numpy as np
import pyopencl as cl
import pytest
from convsolve import Direction, Epilogue, Problem, SolverError, ValidationError, find, reference
from convsolve.db.find_db import FindDb, Record
from convsolve.engine import plan as plan_module
from convsolve.engine.plan import run
from convsolve.engine.run import (
    check_buffers,
    check_device_limits,
    check_handle,
    check_problem,
    check_scratch,
    check_solver_argument,
    resolve_solver,
)
from convsolve.testing import (
    FLOAT32_TOLERANCE,
    device_buffers,
    expected_output,
    random_tensors,
    read_output,
)

PROBLEM = Problem.conv2d((2, 3, 7, 6), (4, 3, 3, 3), padding=((1, 0), (0, 1)))
EMPTY = Problem.conv2d((0, 3, 7, 6), (4, 3, 3, 3), padding=((1, 0), (0, 1)))
NAIVE = {Direction.FORWARD: "direct.NaiveFwd", Direction.BACKWARD_DATA: "direct.NaiveBwdData",
         Direction.BACKWARD_WEIGHTS: "direct.NaiveBwdWeights"}


@pytest.fixture
def buffers(handle):
    return device_buffers(handle, random_tensors(PROBLEM))


def _buffer(handle, nbytes, context=None):
    return cl.Buffer(context or handle.context, cl.mem_flags.READ_WRITE, nbytes)


def _tiny(handle, max_mem_alloc_size, global_mem_size):
    """The session's handle with its device's limits faked (as tests/test_api.py fakes them)."""
    tiny = copy.copy(handle)
    tiny.device = types.SimpleNamespace(
        name="a tiny device", platform=types.SimpleNamespace(name="Fake"),
        max_mem_alloc_size=max_mem_alloc_size, global_mem_size=global_mem_size)
    return tiny


# {{{ arguments

def test_handle_problem_and_solver_arguments_are_checked_by_type():
    """check_handle, check_problem and check_solver_argument return what they accept and refuse
    anything else with a ValidationError naming the argument and the type it got."""
    assert check_problem(PROBLEM) is PROBLEM and check_solver_argument("direct") == "direct"
    for check, field, bad in ((check_handle, "handle", None),
                              (check_problem, "problem", PROBLEM.key()),
                              (check_solver_argument, "solver", ["direct.NaiveFwd"])):
        with pytest.raises(ValidationError, match=f"invalid {field}=") as info:
            check(bad)
        assert info.value.field == field


def test_handle_solver_and_context_are_checked(handle):
    """A missing handle, a solver that is not a name and a buffer of another context are
    ValidationErrors, not AttributeError, TypeError or an OpenCL error."""
    assert check_handle(handle) is handle
    problem = Problem.conv2d((1, 1, 3, 3), (1, 1, 1, 1))
    buffers = {name: _buffer(handle, 64) for name in "xwy"}
    for call in (lambda: convsolve.find(None, problem, **buffers),
                 lambda: convsolve.run(None, problem, "direct.NaiveFwd", **buffers)):
        with pytest.raises(ValidationError, match="handle"):
            call()
    with pytest.raises(ValidationError, match="solver"):
        convsolve.run(handle, problem, ["direct.NaiveFwd"], **buffers)
    other = cl.Context([handle.device])
    foreign = {**buffers, "x": cl.Buffer(other, cl.mem_flags.READ_WRITE, 64)}
    with pytest.raises(ValidationError, match="another context"):
        convsolve.run(handle, problem, "direct.NaiveFwd", **foreign)

# }}}


# {{{ buffers and scratch

def test_buffers_large_enough_are_returned_as_buffers_in_forward_roles(handle):
    """Buffers at least as large as their tensors come back as Buffers (x, w, y), whatever the
    direction; two inputs may share one buffer (both are only read)."""
    big = {name: _buffer(handle, getattr(PROBLEM, name).nbytes + 64) for name in "xwy"}
    for direction in Direction:
        checked = check_buffers(PROBLEM.with_direction(direction), **big, handle=handle)
        assert (checked.x, checked.w, checked.y) == (big["x"], big["w"], big["y"])
    shared = _buffer(handle, max(PROBLEM.x.nbytes, PROBLEM.w.nbytes))
    assert check_buffers(PROBLEM, shared, shared, big["y"]).x == shared


@pytest.mark.parametrize("name", ["x", "w", "y"])
def test_a_buffer_too_small_names_the_field_and_the_bytes_needed(handle, name):
    """A buffer smaller than its tensor is refused naming the argument, its size, the tensor's
    shape and dtype and the bytes it needs; one of exactly that size is accepted."""
    desc = getattr(PROBLEM, name)
    exact = {n: _buffer(handle, getattr(PROBLEM, n).nbytes) for n in "xwy"}
    check_buffers(PROBLEM, **exact)
    small = {**exact, name: _buffer(handle, desc.nbytes - 4)}
    with pytest.raises(ValidationError) as info:
        check_buffers(PROBLEM, **small)
    assert info.value.field == f"{name} buffer size" and info.value.value == desc.nbytes - 4
    assert f"tensor {desc.shape} float32 needs {desc.nbytes} bytes" in str(info.value)


@pytest.mark.parametrize("name", ["x", "w", "y"])
def test_a_missing_buffer_or_one_of_the_wrong_type_is_refused(handle, name):
    """None for a tensor with elements, or an array instead of a pyopencl.Buffer, is refused
    naming the argument (and the bytes it needs, or the type it got)."""
    host = random_tensors(PROBLEM)
    given = device_buffers(handle, host)
    with pytest.raises(ValidationError, match=f"invalid {name}=None: a device buffer of "
                                              f"{getattr(PROBLEM, name).nbytes} bytes"):
        check_buffers(PROBLEM, **{**given, name: None})
    with pytest.raises(ValidationError, match=f"invalid {name}='ndarray': expected a pyopencl"):
        check_buffers(PROBLEM, **{**given, name: host[name]})


@pytest.mark.parametrize("direction", list(Direction))
def test_output_buffer_that_is_also_an_input_is_refused(handle, direction):
    """An output buffer that is also an input's is refused, naming the output, by the check and
    by run and find: the kernels would read what they already overwrote (it gave a wrong answer
    silently)."""
    problem = Problem.conv2d((1, 1, 16, 16), (1, 1, 3, 3), padding=1, direction=direction)
    flags = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
    x = cl.Buffer(handle.context, flags, hostbuf=np.arange(256, dtype=np.float32))
    w = cl.Buffer(handle.context, flags, hostbuf=np.ones(9, np.float32))
    given = {"x": x, "w": w, "y": x}   # y (16 x 16) aliases x
    if direction is Direction.BACKWARD_WEIGHTS:
        given["w"] = x                 # dw aliases x
    for call in (lambda: check_buffers(problem, **given),
                 lambda: convsolve.run(handle, problem, NAIVE[direction], **given),
                 lambda: convsolve.find(handle, problem, **given)):
        with pytest.raises(ValidationError, match="give it a buffer of its own") as info:
            call()
        assert info.value.field == direction.output


def test_a_buffer_of_another_context_is_refused_only_given_a_handle(handle):
    """Given the handle, a buffer made in another context is refused naming the argument and the
    handle's device; without one (explain, the find worker) it is not checked."""
    other = cl.Context([handle.device])
    given = {name: _buffer(handle, getattr(PROBLEM, name).nbytes) for name in "xwy"}
    for name in "xwy":
        foreign = {**given, name: _buffer(handle, getattr(PROBLEM, name).nbytes, other)}
        with pytest.raises(ValidationError, match=f"invalid {name}='a buffer of another "
                                                  f"context': make it in handle.context"):
            check_buffers(PROBLEM, **foreign, handle=handle)
        assert check_buffers(PROBLEM, **foreign).x is foreign["x"]


def test_a_zero_batch_takes_none_for_x_and_y_but_not_for_w(handle):
    """With a zero batch x and y may be None (OpenCL has no empty buffers); w still has elements
    and is required."""
    w = _buffer(handle, EMPTY.w.nbytes)
    for direction in Direction:
        assert check_buffers(EMPTY.with_direction(direction), None, w, None) == (None, w, None)
    with pytest.raises(ValidationError, match="invalid w=None"):
        check_buffers(EMPTY, None, None, None)


def test_scratch_is_checked_against_the_bytes_the_solver_needs(handle):
    """Scratch may be None when nothing is needed; else it must be a pyopencl.Buffer of the
    handle's context holding the bytes needed, the error naming the solver and the bytes."""
    assert check_scratch(None, 0, "s.X", handle) is None
    exact = _buffer(handle, 256)
    assert check_scratch(exact, 256, "s.X", handle) is exact
    for scratch, have in ((None, 0), (_buffer(handle, 255), 255)):
        with pytest.raises(ValidationError, match=f"invalid scratch={have}: 's.X' needs 256 "
                                                  "bytes"):
            check_scratch(scratch, 256, "s.X", handle)
    with pytest.raises(ValidationError, match="invalid scratch='bytearray': expected a pyopencl"):
        check_scratch(bytearray(256), 0, "s.X", handle)
    foreign = _buffer(handle, 256, cl.Context([handle.device]))
    with pytest.raises(ValidationError, match="invalid scratch='a buffer of another context'"):
        check_scratch(foreign, 256, "s.X", handle)
    assert check_scratch(foreign, 256, "s.X") is foreign


# }}}


# {{{ device limits

@pytest.mark.parametrize("name, problem", [
    ("x", Problem.conv2d((1, 4, 4, 4), (1, 4, 1, 1), stride=4)),      # x 256 B, w 16, y 4
    ("w", Problem.conv2d((1, 1, 3, 3), (8, 1, 3, 3))),                # w 288 B, x 36, y 32
    ("y", Problem.conv2d((1, 1, 2, 2), (1, 1, 1, 1), padding=3)),     # y 256 B, x 16, w 4
])
def test_a_tensor_over_the_largest_buffer_is_refused_naming_it(handle, name, problem):
    """A tensor over the device's max_mem_alloc_size is refused naming the tensor, its bytes, the
    limit and the device; one exactly at the limit fits."""
    nbytes = getattr(problem, name).nbytes
    check_device_limits(_tiny(handle, nbytes, 1 << 30), problem)
    with pytest.raises(ValidationError) as info:
        check_device_limits(_tiny(handle, nbytes - 4, 1 << 30), problem)
    assert info.value.field == f"{name} bytes" and info.value.value == nbytes
    message = str(info.value)
    assert f"largest buffer (max_mem_alloc_size), {nbytes - 4} bytes" in message
    assert message.endswith("on Fake: a tiny device")


def test_tensors_over_global_memory_together_are_refused(handle):
    """Tensors that each fit a buffer but together exceed global_mem_size are refused naming
    their total and the limit; a total exactly at the limit fits; every problem is checked."""
    total = PROBLEM.x.nbytes + PROBLEM.w.nbytes + PROBLEM.y.nbytes
    check_device_limits(_tiny(handle, 1 << 20, total), PROBLEM)
    with pytest.raises(ValidationError, match="global memory \\(global_mem_size\\)") as info:
        check_device_limits(_tiny(handle, 1 << 20, total - 1), EMPTY, PROBLEM)
    assert info.value.field == "x + w + y bytes" and info.value.value == total
    check_device_limits(handle, PROBLEM, EMPTY)   # the real device holds both

# }}}


# {{{ resolving a solver

def test_a_name_resolves_to_that_solver(handle):
    """A solver's name resolves to that solver, whatever find ranked."""
    for direction, name in NAIVE.items():
        assert resolve_solver(handle, PROBLEM.with_direction(direction), name).name == name


def test_a_family_resolves_to_its_fastest_solver_find_ranked(handle, buffers):
    """A family resolves to the solver find ranked fastest: from the handle's memory, else (a
    fresh handle, another process) from the find-db, passing over solvers not installed; before
    any find it says to run find first."""
    with pytest.raises(SolverError, match=f"no 'direct' solver was found for {PROBLEM.key()}: "
                                          "run find first, or name a solver"):
        resolve_solver(handle, PROBLEM, "direct")
    find(handle, PROBLEM, **buffers)
    FindDb().clear()
    assert resolve_solver(handle, PROBLEM, "direct").name == "direct.NaiveFwd"
    handle.forget_rankings()
    with pytest.raises(SolverError, match="run find first"):
        resolve_solver(handle, PROBLEM, "direct")
    FindDb().store(handle.db_key, PROBLEM.key(), [Record("direct.Gone", "direct", 0.1, 0),
                                                  Record("direct.NaiveFwd", "direct", 1.0, 0)])
    assert resolve_solver(handle, PROBLEM, "direct").name == "direct.NaiveFwd"


def test_run_by_family_after_find_and_results_are_correct(handle, monkeypatch, buffers):
    """run() accepts a family find ranked; every timed solver computes the right answer."""
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,cs_fake")
    find(handle, PROBLEM, **buffers, mode="NORMAL")
    host = random_tensors(PROBLEM)
    expected = expected_output(PROBLEM, host)
    for solver in ("fake", "direct", "fake.NoWti"):
        buffers["y"] = device_buffers(handle, {"y": np.zeros(PROBLEM.y.shape, np.float32)})["y"]
        run(handle, PROBLEM, solver, **buffers)
        assert reference.relative_error(read_output(handle, PROBLEM, buffers),
                                        expected) < FLOAT32_TOLERANCE


def test_run_refuses_unknown_disabled_and_inapplicable(handle, buffers, monkeypatch):
    """run() names the reason a solver cannot be used: not installed (listing what is), of
    another direction, a family with only failures recorded, or off (naming the switch)."""
    with pytest.raises(SolverError, match="no solver 'nope.X' is installed; installed: "
                                          "direct.NaiveFwd"):
        run(handle, PROBLEM, "nope.X", **buffers)
    with pytest.raises(SolverError, match=f"solver 'direct.NaiveBwdData' cannot run "
                                          f"{PROBLEM.key()}: does not serve FORWARD"):
        run(handle, PROBLEM, "direct.NaiveBwdData", **buffers)
    FindDb().store(handle.db_key, PROBLEM.key(),   # a recorded failure names no solver to run
                   [Record("direct.NaiveFwd", "direct", None, 0, failure="failed to run: x")])
    with pytest.raises(SolverError, match="run find first"):
        run(handle, PROBLEM, "direct", **buffers)
    monkeypatch.setenv("CONVSOLVE_DISABLE_SOLVERS", "direct.NaiveFwd")
    with pytest.raises(SolverError, match="disabled by CONVSOLVE_DISABLE_SOLVERS"):
        run(handle, PROBLEM, "direct.NaiveFwd", **buffers)
    monkeypatch.delenv("CONVSOLVE_DISABLE_SOLVERS")
    monkeypatch.setenv("CONVSOLVE_DEBUG_CONV_DIRECT", "0")
    with pytest.raises(SolverError, match="disabled by CONVSOLVE_DEBUG_CONV_DIRECT=0"):
        resolve_solver(handle, PROBLEM, "direct.NaiveFwd")


def test_an_unfused_name_runs_the_bare_solver_then_the_epilogue_pass(handle, monkeypatch):
    """With an epilogue, '<name>/unfused' resolves to the solver fusing nothing (the core's pass
    does the epilogue) and computes the reference's output; a switch that turns the solver off
    refuses it by name; a bare problem has no such solver."""
    problem = PROBLEM.with_epilogue(Epilogue(bias=True, activation="relu"))
    unfused = resolve_solver(handle, problem, "direct.NaiveFwd/unfused")
    assert unfused.name == "direct.NaiveFwd/unfused" and unfused.fused == 0
    assert resolve_solver(handle, problem, "direct.NaiveFwd").fused == len(problem.epilogue.stages)
    host = random_tensors(problem)
    bias = np.linspace(-1, 1, problem.k, dtype=np.float32)
    buffers = device_buffers(handle, {**host, "bias": bias})
    cl.wait_for_events(run(handle, problem, "direct.NaiveFwd/unfused", **buffers))
    expected = reference.compute(problem, **host, bias=bias)
    assert reference.relative_error(read_output(handle, problem, buffers),
                                    expected) < FLOAT32_TOLERANCE
    with pytest.raises(SolverError, match="no solver 'direct.NaiveFwd/unfused'"):
        resolve_solver(handle, PROBLEM, "direct.NaiveFwd/unfused")
    monkeypatch.setenv("CONVSOLVE_DEBUG_CONV_DIRECT", "0")
    with pytest.raises(SolverError, match="'direct.NaiveFwd' is disabled by "
                                          "CONVSOLVE_DEBUG_CONV_DIRECT=0"):
        resolve_solver(handle, problem, "direct.NaiveFwd/unfused")

# }}}


# {{{ running

@pytest.mark.parametrize("direction", list(Direction))
def test_run_returns_its_events_and_the_reference_output(handle, direction):
    """run enqueues the solver and returns its events; once they complete, the output equals the
    float64 reference (convsolve.reference.compute) in each direction."""
    problem = PROBLEM.with_direction(direction)
    host = random_tensors(problem)
    buffers = device_buffers(handle, host)
    events = run(handle, problem, NAIVE[direction], **buffers)
    assert events and all(isinstance(event, cl.Event) for event in events)
    cl.wait_for_events(events)
    assert {event.command_execution_status for event in events} == {
        cl.command_execution_status.COMPLETE}
    assert reference.relative_error(read_output(handle, problem, buffers),
                                    reference.compute(problem, **host)) < FLOAT32_TOLERANCE


def test_a_zero_batch_runs_nothing_but_zeroes_the_weight_gradient(handle):
    """With a zero batch, forward and backward-data enqueue nothing (x and y None); backward-
    weights fills dw with zeros (the sum over no images)."""
    prior = np.full(EMPTY.w.shape, 7.0, np.float32)
    w = device_buffers(handle, {"w": prior})["w"]
    for direction in (Direction.FORWARD, Direction.BACKWARD_DATA):
        assert run(handle, EMPTY.with_direction(direction), NAIVE[direction],
                   x=None, w=w, y=None) == []
    assert np.array_equal(read_output(handle, EMPTY.with_direction("wrw"), {"w": w}), prior)
    events = run(handle, EMPTY.with_direction("wrw"), "direct.NaiveBwdWeights",
                 x=None, w=w, y=None)
    cl.wait_for_events(events)
    dw = read_output(handle, EMPTY.with_direction("wrw"), {"w": w})
    assert len(events) == 1 and not dw.any()


@pytest.mark.parametrize("value", ["3", "on", "-1"])
def test_a_bad_check_numerics_value_is_refused_before_the_solver_runs(handle, monkeypatch, value):
    """CONVSOLVE_CHECK_NUMERICS other than 0, 1 or 2 is a ValidationError naming the variable and
    its value, raised before the solver writes the output."""
    host = random_tensors(PROBLEM)
    buffers = device_buffers(handle, host)
    monkeypatch.setenv("CONVSOLVE_CHECK_NUMERICS", value)
    with pytest.raises(ValidationError, match="expected 0, 1 or 2") as info:
        run(handle, PROBLEM, "direct.NaiveFwd", **buffers)
    assert (info.value.field, info.value.value) == ("CONVSOLVE_CHECK_NUMERICS", value)
    assert np.array_equal(read_output(handle, PROBLEM, buffers), host["y"])


def test_the_resolution_is_kept_in_the_handle_until_a_switch_changes(handle, monkeypatch,
                                                                      buffers):
    """run resolves a solver and builds its invoker once, reusing both on later calls; a changed
    solver switch (CONVSOLVE_DEBUG_CONV_DIRECT, even set to its default) or a new find drops
    them, so a solver a switch turns off is refused on the next call."""
    calls = {"resolve_solver": 0, "tuned_invoker": 0}

    def counted(name):
        real = getattr(plan_module, name)

        def wrapper(*args, **kwargs):
            calls[name] += 1
            return real(*args, **kwargs)
        monkeypatch.setattr(plan_module, name, wrapper)
    counted("resolve_solver")
    counted("tuned_invoker")
    for _ in range(3):
        run(handle, PROBLEM, "direct.NaiveFwd", **buffers)
    assert calls == {"resolve_solver": 1, "tuned_invoker": 1}
    monkeypatch.setenv("CONVSOLVE_DEBUG_CONV_DIRECT", "1")
    run(handle, PROBLEM, "direct.NaiveFwd", **buffers)
    run(handle, PROBLEM, "direct.NaiveFwd", **buffers)
    assert calls == {"resolve_solver": 2, "tuned_invoker": 2}
    find(handle, PROBLEM, **buffers)
    run(handle, PROBLEM, "direct.NaiveFwd", **buffers)
    assert calls == {"resolve_solver": 3, "tuned_invoker": 3}
    monkeypatch.setenv("CONVSOLVE_DEBUG_CONV_DIRECT", "0")
    with pytest.raises(SolverError, match="disabled by CONVSOLVE_DEBUG_CONV_DIRECT=0"):
        run(handle, PROBLEM, "direct.NaiveFwd", **buffers)

# }}}
