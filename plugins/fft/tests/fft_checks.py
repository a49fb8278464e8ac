"""Runs of the FFT solvers against the reference, which the FFT tests share."""
import numpy as np
import pyopencl as cl
from convsolve import Buffers, Direction, Problem
from convsolve.testing import (
    device_buffers,
    expected_output,
    random_tensors,
    read_output,
    relative_error,
)


def run(handle, solver, problem, config=None, seed=1, host=None):
    """The solver's output for ``problem`` (random inputs, or ``host``) and the reference's."""
    host = host or random_tensors(problem, seed)
    buffers = device_buffers(handle, host)
    scratch = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, max(4, solver.workspace(problem)))
    invoker = solver.build_invoker(problem, handle, config or solver.default_config(problem,
                                                                                    handle))
    cl.wait_for_events(invoker(Buffers(**buffers), scratch))
    with np.errstate(invalid="ignore"):
        return read_output(handle, problem, buffers), expected_output(problem, host)


def assert_matches(handle, solver, shapes, config=None):
    """Every applicable problem of ``shapes`` (x, w, stride, padding, dilation, groups), in every
    direction, matches the reference within the solver's tolerance; returns how many ran."""
    ran, failures = 0, []
    for x, w, stride, padding, dilation, groups in shapes:
        for direction in Direction:
            problem = Problem.conv2d(x, w, stride, padding, dilation, groups, direction)
            if not solver.is_applicable(problem):
                continue
            result, expected = run(handle, solver, problem, config)
            error = relative_error(result, expected)
            ran += 1
            if not error < solver.tolerance:
                failures.append(f"{problem.key()}: error {error:.3g}")
    assert not failures, f"{solver.name} with {config}:\n  " + "\n  ".join(failures)
    return ran
