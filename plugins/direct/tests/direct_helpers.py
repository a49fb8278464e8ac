"""Shared by the direct plugin's tests: running a solver with a chosen config, and config picks."""
import numpy as np
import pyopencl as cl
from convsolve import Buffers, registry
from convsolve.testing import (
    device_buffers,
    expected_output,
    random_tensors,
    read_output,
    relative_error,
)
from convsolve_direct.configs import snapped


def run_config(handle, solver, problem, config, host):
    """``solver``'s output for ``problem`` on the host arrays, built with ``config``."""
    buffers = device_buffers(handle, host)
    workspace = solver.workspace(problem)
    scratch = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, workspace) if workspace else None
    invoker = solver.build_invoker(problem, handle, config)
    cl.wait_for_events(invoker(Buffers(**buffers), scratch))
    return read_output(handle, problem, buffers)


def configs_to_check(handle, solver, problem, wishes):
    """The default config, then each wish (a partial config) completed from the default and
    moved onto the problem's space, when valid there and new."""
    space = solver.config_space(problem, handle)
    default = solver.default_config(problem, handle)
    chosen = [default]
    for wish in wishes:
        config = snapped(space, {**default, **wish})
        if (space.refusal(config) is None and not solver.check_config(problem, handle, config)
                and config not in chosen):
            chosen.append(config)
    return chosen


def assert_matches_reference(handle, name, problem, wishes, seed=0):
    """``name`` agrees with the float64 reference on ``problem`` with each config chosen."""
    solver = registry().get(name)
    assert solver.is_applicable(problem), problem.key()
    host = random_tensors(problem, seed)
    expected = expected_output(problem, host)
    for config in configs_to_check(handle, solver, problem, wishes):
        error = relative_error(run_config(handle, solver, problem, config, host), expected)
        assert error < 1e-5, f"{problem.key()} with {config}: relative error {error:.3g}"


def equal_bits(a, b):
    """Whether two float arrays are bitwise equal (NaNs included)."""
    return np.array_equal(a.view(np.uint32), b.view(np.uint32))
