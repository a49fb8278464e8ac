"""Checks the FFT tests share: the family's non-finite semantics, and runs against the reference.

The core's check_solver holds a solver to the reference's exact NaN/inf pattern, which no
transform-based solver can meet: one non-finite input makes its whole transform non-finite. The
FFT solvers promise instead (README: non-finite inputs):
  * every output the reference makes non-finite is non-finite (NaN or +-inf, not necessarily
    the reference's kind);
  * other outputs may be non-finite only where they share a transform product with a
    non-finite input: forward, y[n, k in c's group] for x[n, c] and y[:, k] for w[k, c];
    backward-data, dx[n, c in k's group] for dy[n, k] and dx[:, c] for w[k, c];
    backward-weights, w[k in c's group, c] for x[n, c] and w[k, c in k's group] for dy[n, k];
  * every output the reference and the solver both leave finite is within the tolerance.
`nonfinite_failures` checks exactly that, with check_solver's own planted values, and the tests
put it in check_solver's place (the proposal to the lead: a solver attribute that selects it).
"""
import numpy as np
import pyopencl as cl
from convsolve import Buffers, Direction, Problem
from convsolve import testing as cs_testing
from convsolve.testing import (
    device_buffers,
    expected_output,
    random_tensors,
    read_output,
    relative_error,
)


def reach(problem, planted):
    """Output mask (the output's shape) of what non-finite inputs may spoil, channel-wise."""
    p, d = problem, problem.direction
    kg, cg = p.k // p.groups, p.c // p.groups
    out = np.zeros(getattr(p, d.output).shape, bool)
    bad = {name: ~np.isfinite(array) for name, array in planted.items() if array.size}
    if d is Direction.FORWARD:
        for n, c in zip(*np.nonzero(bad["x"].any(axis=(2, 3)))):
            out[n, c // cg * kg:(c // cg + 1) * kg] = True
        out[:, bad["w"].any(axis=(1, 2, 3))] = True
    elif d is Direction.BACKWARD_DATA:
        for n, k in zip(*np.nonzero(bad["y"].any(axis=(2, 3)))):
            out[n, k // kg * cg:(k // kg + 1) * cg] = True
        for k, c in zip(*np.nonzero(bad["w"].any(axis=(2, 3)))):
            out[:, k // kg * cg + c] = True
    else:
        for n, c in zip(*np.nonzero(bad["x"].any(axis=(2, 3)))):
            out[c // cg * kg:(c // cg + 1) * kg, c % cg] = True
        for n, k in zip(*np.nonzero(bad["y"].any(axis=(2, 3)))):
            out[k] = True
    return out


def compare(result, expected, planted, problem, tolerance):
    """Failures of the FFT non-finite semantics for one result."""
    failures = []
    missing = ~np.isfinite(expected) & np.isfinite(result)
    if missing.any():
        failures.append(f"{int(missing.sum())} outputs finite where the reference is not")
    stray = ~np.isfinite(result) & ~reach(problem, planted)
    if stray.any():
        failures.append(f"{int(stray.sum())} non-finite outputs out of the inputs' reach")
    both = np.isfinite(result) & np.isfinite(expected)
    if both.any() and not relative_error(result[both], expected[both]) < tolerance:
        failures.append("finite outputs off by "
                        f"{relative_error(result[both], expected[both]):.3g}")
    return failures


def nonfinite_failures(handle, problem, invoker, host, scratch, tolerance, where, mode=None):
    """check_solver's non-finite check (same signature as convsolve.testing._check_nonfinite)
    under the FFT semantics."""
    planted = {name: array.copy() for name, array in host.items()}
    for name, index, value in cs_testing._PLANTED[problem.direction]:
        if planted[name].size:
            planted[name].flat[index] = value
    buffers = device_buffers(handle, planted)
    cl.wait_for_events(invoker(Buffers(**buffers), scratch))
    with np.errstate(invalid="ignore"):
        expected = expected_output(problem, planted)
    found = compare(read_output(handle, problem, buffers), expected, planted, problem, tolerance)
    return [f"{where}: non-finite inputs: {text}" for text in found]


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
