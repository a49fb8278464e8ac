"""Opt-in pytest plugin for solver tests: a device handle, isolated find-dbs, buffers and the reference.

Enable it with ``pytest_plugins = ["convsolve.testing"]`` in a top-level conftest.py, or ``-p
convsolve.testing``.  ``CONVSOLVE_TEST_DEVICE`` picks the device (as CONVSOLVE_DEVICE does).
"""
import os

import numpy as np
import pyopencl as cl
import pytest

from . import env, plugins, reference
from .calls import build_invoker, events_of, workspace_of, wti_of
from .errors import ContractError
from .handle import Handle
from .hookspecs import OPTIONAL_SOLVER_ATTRIBUTES, Buffers
from .problem import Direction, Problem
from .reference import relative_error  # noqa: F401 - re-exported for plugins' tests
from .tensors import device_buffers, random_tensors, read_output  # noqa: F401 - re-exported likewise

#: Relative RMS error against the float64 reference that float32 solvers must stay under.
FLOAT32_TOLERANCE = OPTIONAL_SOLVER_ATTRIBUTES["tolerance"]

#: The standard problem shapes: (x_shape, w_shape, stride, padding, dilation, groups).
STANDARD_SHAPES = [
    ((1, 1, 1, 1), (1, 1, 1, 1), 1, 0, 1, 1),                    # smallest
    ((2, 3, 7, 5), (4, 3, 3, 3), 1, 1, 1, 1),                    # odd, non-square, batch 2
    ((1, 5, 9, 11), (3, 5, 3, 2), (2, 3), 0, 1, 1),              # strides, non-square filter
    ((3, 4, 8, 9), (6, 4, 3, 3), 1, ((1, 0), (2, 1)), 1, 1),     # asymmetric padding, batch 3
    ((1, 2, 10, 9), (2, 2, 3, 3), 1, 2, (2, 3), 1),              # dilation
    ((2, 6, 6, 7), (9, 2, 3, 1), 2, ((0, 2), (1, 0)), 1, 3),     # groups
    ((2, 8, 7, 7), (8, 1, 3, 3), 1, 1, 1, 8),                    # depthwise
    ((1, 4, 5, 5), (4, 4, 5, 5), 1, 0, 1, 1),                    # filter as large as the input
    ((2, 16, 6, 6), (24, 16, 1, 1), 1, 0, 1, 1),                 # pointwise 1x1
    ((2, 3, 6, 6), (5, 3, 1, 1), 2, 0, 1, 1),                    # strided 1x1
    ((1, 2, 4, 4), (3, 2, 2, 2), 3, 0, 1, 1),                    # stride larger than the filter
    ((4, 17, 13, 11), (19, 17, 3, 3), 1, 1, 1, 1),               # primes everywhere
]
_GUARD_BYTES = 4096   # written past the reported workspace: caught, and still inside the buffer
_PATTERN = 0xA5


@pytest.fixture(autouse=True)
def convsolve_isolated(tmp_path, monkeypatch):
    """Each test sees an empty user and system find-db and none of the caller's CONVSOLVE_* switches."""
    for name in list(os.environ):
        if name.startswith("CONVSOLVE_") and name not in ("CONVSOLVE_CACHE_DIR",
                                                           "CONVSOLVE_TEST_DEVICE"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("CONVSOLVE_USER_DB_PATH", str(tmp_path / "find.sqlite"))
    system = tmp_path / "system_db.jsonl"
    system.write_text("")
    monkeypatch.setenv("CONVSOLVE_SYSTEM_DB_PATH", str(system))
    plugins.reset()


@pytest.fixture(scope="session")
def convsolve_session_handle():
    """One Handle for the session (programs and invokers built once), on CONVSOLVE_TEST_DEVICE."""
    return Handle(env.TEST_DEVICE.raw() or None)


@pytest.fixture
def handle(convsolve_session_handle):
    """The session's Handle, with find's memory of earlier tests' problems dropped."""
    convsolve_session_handle.forget_rankings()
    return convsolve_session_handle


def expected_output(problem, host):
    """The float64 reference output of ``problem`` for the host arrays."""
    return reference.compute(problem, **host)


# {{{ check_solver

def standard_problems(directions=tuple(Direction)):
    """The standard problem set: every STANDARD_SHAPES entry in each of ``directions``."""
    return [Problem.conv2d(x, w, stride, padding, dilation, groups, direction)
            for direction in directions
            for x, w, stride, padding, dilation, groups in STANDARD_SHAPES]


def _guarded_buffers(handle, problem, host):
    """Device buffers of the three tensors, each followed by a guard zone of _GUARD_BYTES of
    _PATTERN: the inputs hold ``host``'s arrays, the output NaN (so unwritten elements show)."""
    buffers = {}
    for name, array in host.items():
        buffer = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, array.nbytes + _GUARD_BYTES)
        cl.enqueue_fill_buffer(handle.queue, buffer, np.uint8(_PATTERN), array.nbytes,
                               _GUARD_BYTES)
        if name == problem.direction.output:
            cl.enqueue_fill_buffer(handle.queue, buffer, np.float32(np.nan), 0, array.nbytes)
        elif array.size:
            cl.enqueue_copy(handle.queue, buffer, array)
        buffers[name] = buffer
    return buffers


def _guard_failures(handle, problem, buffers):
    """A message per tensor buffer whose guard zone was written: the buffer and the offset."""
    failures = []
    for name, buffer in buffers.items():
        nbytes = getattr(problem, name).nbytes
        zone = np.empty(_GUARD_BYTES, np.uint8)
        cl.enqueue_copy(handle.queue, zone, buffer, src_offset=nbytes)
        written = np.flatnonzero(zone != _PATTERN)
        if written.size:
            role = "output" if name == problem.direction.output else "input"
            failures.append(f"{problem.key()}: wrote past its {role} {name!r} (a tensor of "
                            f"{nbytes} bytes; byte {nbytes + written[0]} written)")
    return failures


def _read_bytes(handle, buffer, nbytes):
    out = np.empty(nbytes, np.uint8)
    cl.enqueue_copy(handle.queue, out, buffer)
    return out


def _check_one(solver, handle, problem, seed):
    """Failure messages of ``solver`` on one problem it accepts (empty when it passes)."""
    key = problem.key()
    try:   # the contract's checks, as find applies them
        wti_of(solver, problem)
        workspace = workspace_of(solver, problem)
    except ContractError as exc:
        return [f"{key}: {exc.reason}"]
    host = random_tensors(problem, seed)
    out = problem.direction.output
    buffers = _guarded_buffers(handle, problem, host)
    scratch = None
    if workspace:
        scratch = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, workspace + _GUARD_BYTES)
        cl.enqueue_fill_buffer(handle.queue, scratch, np.uint8(_PATTERN), 0, workspace + _GUARD_BYTES)
    try:
        built = build_invoker(solver, problem, handle)

        def invoker(buffers, scratch):
            return events_of(solver.name, built(buffers, scratch))
        cl.wait_for_events(invoker(Buffers(**buffers), scratch))
        first = read_output(handle, problem, buffers)
    except Exception as exc:  # noqa: BLE001 - any failure to run is a finding
        return [f"{key}: failed to build or run: {exc!r}"]
    failures = _guard_failures(handle, problem, buffers)
    error = reference.relative_error(first, expected_output(problem, host))
    tolerance = plugins.solver_attribute(solver, "tolerance")
    if not error < tolerance:
        unwritten = int(np.isnan(first).sum())
        failures.append(f"{key}: wrong result, relative error {error:.3g} >= {tolerance:g}"
                        + (f" ({unwritten} output elements never written)" if unwritten else ""))
    for name, array in host.items():
        if name != out and array.size:
            now = np.empty_like(array)
            cl.enqueue_copy(handle.queue, now, buffers[name], is_blocking=True)
            if not np.array_equal(now, array):
                failures.append(f"{key}: modified its input {name!r}")
    if scratch is not None:
        used = np.flatnonzero(_read_bytes(handle, scratch, workspace + _GUARD_BYTES) != _PATTERN)
        if used.size and used[-1] >= workspace:
            failures.append(f"{key}: wrote past its workspace ({workspace} bytes reported, byte "
                            f"{used[-1]} written)")
        elif not used.size or used[-1] < workspace - 64:
            failures.append(f"{key}: reports {workspace} bytes of workspace but writes only "
                            f"{0 if not used.size else used[-1] + 1}")
    if plugins.solver_attribute(solver, "deterministic"):
        buffers = _guarded_buffers(handle, problem, host)
        cl.wait_for_events(invoker(Buffers(**buffers), scratch))
        if not np.array_equal(read_output(handle, problem, buffers), first, equal_nan=True):
            failures.append(f"{key}: claims to be deterministic but two runs differ")
    failures += _check_nonfinite(handle, problem, invoker, host, scratch, tolerance)
    return failures


#: Where check_solver plants non-finite values, per direction: (tensor, flat index, value).  The
#: first elements meet the zero padding through the first filter tap.
_PLANTED = {
    Direction.FORWARD: (("w", 0, np.inf), ("x", -1, np.nan)),
    Direction.BACKWARD_DATA: (("w", 0, -np.inf), ("y", 0, np.nan)),
    Direction.BACKWARD_WEIGHTS: (("x", 0, np.inf), ("y", -1, np.nan)),
}


def _check_nonfinite(handle, problem, invoker, host, scratch, tolerance):
    """Failures of the non-finite semantics: with an inf and a NaN planted in the inputs, the
    output must have NaN and +-inf exactly where the float64 reference has them."""
    planted = {name: array.copy() for name, array in host.items()}
    for name, index, value in _PLANTED[problem.direction]:
        if planted[name].size:
            planted[name].flat[index] = value
    buffers = _guarded_buffers(handle, problem, planted)
    cl.wait_for_events(invoker(Buffers(**buffers), scratch))
    result = read_output(handle, problem, buffers)
    with np.errstate(invalid="ignore"):
        expected = expected_output(problem, planted)
    for what, test in (("NaN", np.isnan), ("+inf", np.isposinf), ("-inf", np.isneginf)):
        if not np.array_equal(test(result), test(expected)):
            return [f"{problem.key()}: non-finite inputs: {int(test(result).sum())} {what} in the "
                    f"output where the reference has {int(test(expected).sum())} (padding must "
                    "take part in the products: 0 * inf = NaN)"]
    finite = np.isfinite(expected)
    error = reference.relative_error(result[finite], expected[finite])
    if finite.any() and not error < tolerance:
        return [f"{problem.key()}: non-finite inputs: finite outputs off by {error:.3g}"]
    return []


def check_solver(solver, handle, problems=None, seed=0):
    """Assert that ``solver`` honours the contract; returns how many problems it was checked on.

    On each problem (default: standard_problems()) of a direction it serves: is_applicable must not
    raise; where it accepts, get_wti and workspace must be in range, the output must match the
    float64 reference within the solver's ``tolerance`` and be written completely, the inputs
    must stay untouched, nothing may be written past any tensor (a guard zone follows each
    buffer), the workspace it reports must be exactly enough (writes past it and
    workspace it never writes are both failures), a ``deterministic`` solver must give
    bitwise-equal results twice, and with an inf and a NaN planted in the inputs the output must
    be non-finite exactly where the reference's is.  A solver that discovery would refuse (its
    plugin's CONVSOLVE_SOLVER_API, its attributes, a misspelt hook or argument) fails at once,
    in discovery's words.  Raises AssertionError listing every failure.
    """
    refusal = plugins.contract_refusal(solver)
    if refusal:
        raise AssertionError(f"{getattr(solver, 'name', solver)!r} fails check_solver: "
                             f"discovery refuses it: {refusal}")
    failures, checked = [], 0
    for problem in standard_problems() if problems is None else problems:
        if problem.direction not in solver.directions:
            continue
        try:
            applicable = bool(solver.is_applicable(problem))
        except Exception as exc:  # noqa: BLE001
            failures.append(f"{problem.key()}: is_applicable raised {exc!r}")
            continue
        if applicable:
            checked += 1
            failures += _check_one(solver, handle, problem, seed)
    if not checked and not failures:
        failures.append("applicable to none of the problems checked")
    if failures:
        raise AssertionError(f"{solver.name} fails check_solver:\n  " + "\n  ".join(failures))
    return checked

# }}}
