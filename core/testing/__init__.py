"""Opt-in pytest plugin for solver tests: a device handle, isolated find-dbs, buffers and the reference.

Enable it with ``pytest_plugins = ["convsolve.testing"]`` in a top-level conftest.py, or ``-p
convsolve.testing``.  ``CONVSOLVE_TEST_DEVICE`` picks the device (as CONVSOLVE_DEVICE does).
``pytest --convsolve-isolate`` and ``--convsolve-sanitize`` make every check_solver call of the
session run isolated or on Oclgrind (see check_solver).
"""
import itertools
import os
import random
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pyopencl as cl
import pytest

from .. import env, reference
from ..device.handle import Handle, describe, is_gpu, is_simulator
from ..device.tensors import device_buffers, random_tensors, read_output  # noqa: F401 - re-exported likewise
from ..errors import ContractError
from ..hookspecs import OPTIONAL_SOLVER_ATTRIBUTES, Buffers
from ..problem import LAYOUTS, Direction, Problem
from ..reference import relative_error  # noqa: F401 - re-exported for plugins' tests
from ..solvers import registry as plugins
from ..solvers.calls import (
    build_invoker,
    config_refusal,
    default_config_of,
    events_of,
    is_tunable,
    space_of,
    workspace_of,
    wti_of,
)
from ..tuning import config_key
from . import epilogue_cases, guarded, isolation
from .isolation import retyped  # noqa: F401 - re-exported: a device class's kernels anywhere

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
    ((3, 6, 9, 7), (4, 3, 1, 1), (2, 3), 0, 1, 2),               # 1x1: grouped, odd, unequal strides
    ((1, 2, 4, 4), (3, 2, 2, 2), 3, 0, 1, 1),                    # stride larger than the filter
    ((4, 17, 13, 11), (19, 17, 3, 3), 1, 1, 1, 1),               # primes everywhere
]


@pytest.fixture(autouse=True)
def convsolve_isolated(tmp_path, monkeypatch):
    """Each test sees empty user and system find-dbs and perf-dbs and none of the caller's
    CONVSOLVE_* switches."""
    for name in list(os.environ):
        if name.startswith("CONVSOLVE_") and name not in ("CONVSOLVE_CACHE_DIR",
                                                           "CONVSOLVE_TEST_DEVICE"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("CONVSOLVE_USER_DB_PATH", str(tmp_path / "find.sqlite"))
    monkeypatch.setenv("CONVSOLVE_PERF_DB_PATH", str(tmp_path / "perf.sqlite"))
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


# {{{ fake devices, for what hooks choose per device class

_TYPE = cl.device_type
_POCL = {"type": _TYPE.CPU, "platform": "Portable Computing Language", "max_compute_units": 2,
         "max_work_group_size": 4096, "local_mem_size": 1 << 20, "max_mem_alloc_size": 1 << 32,
         "global_mem_size": 1 << 34}
_POCL_VERSION = "OpenCL 3.0 PoCL 3.1 HSTR: pthread-x86_64-pc-linux-gnu-"
#: The device classes fake_device knows, with every attribute of theirs that the core and the
#: built-in plugins read to choose configs (tuning.device_keys, the solvers' check_config);
#: ``preferred_vector_width_float`` is the native width.
FAKE_DEVICES = {
    "avx512": {**_POCL, "name": "pthread-skylake-avx512-Some CPU", "vendor": "GenuineIntel",
               "version": _POCL_VERSION + "skylake-avx512", "native_vector_width_float": 16},
    "avx2": {**_POCL, "name": "pthread-haswell-Some CPU", "vendor": "AuthenticAMD",
             "version": _POCL_VERSION + "haswell", "native_vector_width_float": 8},
    "gpu": {"type": _TYPE.GPU, "name": "NVIDIA H200", "vendor": "NVIDIA Corporation",
            "version": "OpenCL 3.0 CUDA", "platform": "NVIDIA CUDA", "max_compute_units": 132,
            "native_vector_width_float": 1, "max_work_group_size": 1024,
            "local_mem_size": 48 << 10, "max_mem_alloc_size": 35 << 30,
            "global_mem_size": 140 << 30},
    "oclgrind": {"type": _TYPE.DEFAULT | _TYPE.CPU | _TYPE.GPU | _TYPE.ACCELERATOR,
                 "name": "Oclgrind Simulator", "vendor": "University of Bristol",
                 "version": "OpenCL 1.2 (Oclgrind 21.10)", "platform": "Oclgrind",
                 "native_vector_width_float": 0, "max_work_group_size": 1024,
                 "local_mem_size": 1 << 15, "max_compute_units": 1, "max_mem_alloc_size": 1 << 27,
                 "global_mem_size": 1 << 29},
}


def fake_device(kind, **fields):
    """A stand-in for a pyopencl Device of class ``kind`` (a key of FAKE_DEVICES), with no
    device behind it; ``fields`` replace its attributes (``platform``: the platform's name)."""
    values = {**FAKE_DEVICES[kind], **fields}
    values.setdefault("preferred_vector_width_float", values["native_vector_width_float"])
    return SimpleNamespace(**{**values, "platform": SimpleNamespace(name=values["platform"])})


def fake_handle(kind, **device_fields):
    """A stand-in for a Handle on ``fake_device(kind, **device_fields)``, for testing what
    ``default_config`` and ``check_config`` choose per device class: it has ``device``,
    ``name``, ``is_cpu``, ``is_gpu`` and ``is_simulator``, and builds and runs nothing."""
    device = fake_device(kind, **device_fields)
    return SimpleNamespace(device=device, name=describe(device.platform, device),
                           is_cpu=bool(device.type & _TYPE.CPU), is_gpu=is_gpu(device),
                           is_simulator=is_simulator(device.platform, device))

# }}}


# {{{ problem sets

def standard_problems(directions=tuple(Direction)):
    """The standard problem set: every STANDARD_SHAPES entry in each of ``directions``."""
    return [Problem.conv2d(x, w, stride, padding, dilation, groups, direction)
            for direction in directions
            for x, w, stride, padding, dilation, groups in STANDARD_SHAPES]


#: Extra shapes (x, w, stride, padding, dilation, groups) for what tiled kernels get wrong at
#: their edges, as small as Oclgrind (about 1000x slower than a CPU) needs.
EDGE_SHAPES = [
    ((1, 2, 9, 9), (65, 2, 1, 1), 1, 0, 1, 1),                 # 65 x 81 outputs: past a 64 tile
    ((1, 3, 8, 8), (64, 3, 1, 1), 1, 0, 1, 1),                 # exactly one 64 x 64 tile
    ((2, 1, 17, 17), (3, 1, 3, 3), 1, 1, 1, 1),                # a 578-deep weight reduction
    ((1, 2, 3, 2), (2, 2, 2, 2), 1, ((3, 1), (0, 2)), 1, 1),   # windows wholly in the padding
]
#: Standard shapes up to this many FLOPs run sanitised (all but "primes everywhere", 3.3 MFLOP,
#: which alone would take 35 s under Oclgrind on 2 cores).
MAX_FLOPS = 1_000_000


#: Shapes (x, w, stride, padding, dilation, groups) of every spatial rank, each checked in the
#: layouts a solver claims (claimed_problems): odd sizes, strides, dilation, groups, depthwise,
#: asymmetric padding, as small as Oclgrind needs.
ND_SHAPES = {
    1: [((2, 4, 11), (6, 2, 3), 2, ((1, 2),), 2, 2),                   # groups, stride, dilation
        ((1, 3, 7), (3, 1, 3), 1, 1, 1, 3),                            # depthwise
        ((2, 6, 9), (4, 3, 1), 2, 0, 1, 2)],                           # pointwise: strided, groups
    2: [((2, 6, 7, 5), (9, 2, 3, 2), (2, 1), ((0, 2), (1, 0)), (1, 2), 3),
        ((2, 6, 7, 5), (4, 3, 1, 1), 2, 0, 1, 2),                      # pointwise: strided, groups
        ((2, 5, 6, 7), (10, 1, 3, 2), (2, 1), ((1, 0), (0, 1)), (1, 2), 5)],   # depthwise, M = 2
    3: [((1, 4, 5, 6, 7), (6, 2, 3, 2, 3), (1, 2, 2), ((1, 0), (0, 1), (2, 1)), (2, 1, 1), 2),
        ((2, 3, 3, 4, 5), (4, 3, 1, 1, 1), 1, 0, 1, 1),                # pointwise
        ((1, 4, 4, 5, 3), (4, 1, 3, 3, 3), 2, 1, 1, 4)],               # depthwise, strided
}


def claimed_problems(solver, directions=tuple(Direction)):
    """ND_SHAPES in each of ``directions`` the solver serves and each spatial rank it claims
    (``spatial_dims``), in each of three layout choices it claims (``layouts``): every tensor
    channels-first, every tensor channels-last, x and y channels-last with channels-first
    weights; the 2-D channels-first ones are left to the standard set."""
    ranks, layouts = (plugins.solver_attribute(solver, name) for name in ("spatial_dims",
                                                                          "layouts"))
    problems = []
    for rank in ranks:
        first, last = LAYOUTS[rank]
        choices = [{"x": first, "w": first, "y": first}] if rank != 2 else []
        choices += [{"x": last, "w": last, "y": last}, {"x": last, "w": first, "y": last}]
        problems += [Problem.convolution(*shape, direction=direction, layout=choice)
                     for choice in choices if set(choice.values()) <= set(layouts)
                     for direction in directions if direction in solver.directions
                     for shape in ND_SHAPES[rank]]
    return problems


def sanitized_problems(directions=tuple(Direction)):
    """The standard problems of ``directions`` up to MAX_FLOPS, then EDGE_SHAPES in each: what
    ``check_solver(..., sanitize=True)`` checks unless given problems."""
    return ([p for p in standard_problems(directions) if p.flops <= MAX_FLOPS]
            + [Problem.conv2d(*shape, direction=d) for d in directions for shape in EDGE_SHAPES])

# }}}


# {{{ a crash is never silent: session options and the watcher

_session = {"isolate": False, "sanitize": False, "stderr": None, "watcher": None}


def pytest_addoption(parser):
    group = parser.getgroup("convsolve", "convsolve.testing")
    group.addoption("--convsolve-isolate", action="store_true",
                    help="check_solver checks in a worker process, so that a solver that kills "
                         "the process fails naming the problem (Python-level monkeypatches are "
                         "not seen there)")
    group.addoption("--convsolve-sanitize", action="store_true",
                    help="check_solver checks on Oclgrind with its memory and data-race checks; "
                         "any report fails")


def pytest_configure(config):
    """The options' session defaults, and the terminal's stderr for the watcher (output is not
    captured yet)."""
    _session.update(isolate=config.getoption("convsolve_isolate", False),
                    sanitize=config.getoption("convsolve_sanitize", False), stderr=os.dup(2))


#: The watcher: it reads what check_solver is running, one line each, until this process ends;
#: then, unless the last line is empty (check_solver returned or raised), it names the run.
_WATCHER = """import sys
last = ""
for last in sys.stdin:
    pass
if last.strip():
    sys.stderr.write("\\nconvsolve.testing: the process died while check_solver ran " + last
                     + "  (check_solver(..., isolate=True) or pytest --convsolve-isolate runs "
                     "each problem in a worker process and reports its death as a failure)\\n")
"""


def _running(text):
    """Tell the watcher, a process started on first use, what check_solver runs now ('' when
    done), so that if a kernel or invoker kills this process (a write far past a buffer
    corrupting the heap: 'double free or corruption', exit 134), the run is named on stderr."""
    watcher = _session["watcher"]
    if watcher is None or watcher.poll() is not None:
        watcher = _session["watcher"] = subprocess.Popen(
            [sys.executable, "-c", _WATCHER], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
            stderr=_session["stderr"] or sys.__stderr__, text=True)
    try:
        watcher.stdin.write(text.replace("\n", " ") + "\n")
        watcher.stdin.flush()
    except OSError:   # it died: a warning that cannot be given is no reason to fail a check
        pass

# }}}


# {{{ check_solver

#: Seconds a run of an in-process check_solver may take before it fails as hung (isolated, the
#: caller's isolation.REPLY_LIMIT_S applies instead).
RUN_LIMIT_S = isolation.REPLY_LIMIT_S


def _configs(solver, handle, problem, seed, count):
    """A tunable solver's configs to check on ``problem``: its default (ContractError when that
    is not valid), then up to ``count`` others drawn at random from its space (the draw differs
    between problems), less those its check_config refuses."""
    default = default_config_of(solver, problem, handle)
    if not count:   # drawing would enumerate the space (millions of configs) for nothing
        return [default]
    space = space_of(solver, problem, handle)
    drawn = iter(space.sample(4 * count + 1, random.Random(f"{seed}/{problem.key()}")))
    others = (config for config in drawn if config_key(config) != config_key(default)
              and config_refusal(solver, problem, handle, config, space) is None)
    return [default, *itertools.islice(others, count)]


def check_problem(solver, handle, problem, seed=0, configs=0, progress=None, epilogues=(),
                  thorough=1, limit_s=None):
    """check_solver's failure messages for one ``problem`` that ``solver`` accepts (empty when
    it passes); a tunable solver is checked with its default config and up to ``configs``
    others drawn at random (the first ``thorough`` of them with every check, as the default;
    the rest against the reference and their workspace only), then the epilogue cases labelled
    in ``epilogues`` (epilogue_cases).  ``progress(problem, config)`` is called before each
    run; a run still going after ``limit_s`` seconds (None: no limit) raises guarded.Hung."""
    key = problem.key()
    try:   # the contract's checks, as find applies them
        wti_of(solver, problem)
        workspace = workspace_of(solver, problem, handle)
        runs = _configs(solver, handle, problem, seed, configs) if is_tunable(solver) else [None]
    except ContractError as exc:
        return [f"{key}: {exc.reason}"]
    host = random_tensors(problem, seed)
    expected = expected_output(problem, host)
    failures, written = [], []
    for index, config in enumerate(runs):
        if progress:
            progress(problem, config)
        found, last_byte = _check_one(solver, handle, problem, (host, expected), workspace,
                                      config, index <= thorough, limit_s)
        failures += found
        written.append(last_byte)
    if workspace and None not in written and max(written) < workspace - 64:
        failures.append(f"{key}: reports {workspace} bytes of workspace but writes only "
                        f"{max(written) + 1}" + (f" with any of the {len(runs)} configs checked"
                                                 if len(runs) > 1 else ""))
    if epilogues:
        failures += epilogue_cases.failures(solver, handle, problem, seed, progress, epilogues,
                                            limit_s)
    return failures


def _check_one(solver, handle, problem, tensors, workspace, config, thorough, limit_s):
    """Failure messages of ``solver`` built with ``config`` on ``problem`` (``tensors``: the
    host arrays and the reference output), and the last byte of the workspace it wrote (-1:
    none; None: it did not run); a run that is not ``thorough`` is held to the reference and
    its workspace only."""
    where = isolation.label(problem.key(), config)
    (host, expected), out = tensors, problem.direction.output
    buffers = guarded.tensors(handle, host, blank=(out,))
    scratch = guarded.allocate(handle, workspace) if workspace else None
    try:
        built = build_invoker(solver, problem, handle, config)

        def invoker(buffers, scratch):   # waits for its run, at most limit_s
            events = events_of(solver.name, built(buffers, scratch))
            guarded.finish(events, limit_s, where)
            return events
        invoker(Buffers(**buffers), scratch)
        first = read_output(handle, problem, buffers)
    except guarded.Hung:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure to run is a finding
        return [f"{where}: failed to build or run: {exc!r}"], None
    failures = guarded.overruns(handle, buffers, {name: a.nbytes for name, a in host.items()},
                                out, where) if thorough else []
    with np.errstate(invalid="ignore"):   # PATTERN is a signalling NaN
        error = reference.relative_error(first, expected)
    tolerance = plugins.solver_attribute(solver, "tolerance")
    if not error < tolerance:
        unwritten = int((first.view(np.uint32) == guarded.PATTERN).sum())
        computed = int(np.isnan(first).sum()) - unwritten
        failures.append(f"{where}: wrong result, relative error {error:.3g} >= {tolerance:g}"
                        + (f" ({unwritten} output elements never written)" if unwritten else "")
                        + (f" ({computed} NaN outputs from finite inputs: a read past an input "
                           "gives NaN, its guard zone's)" if computed else ""))
    for name, array in host.items():
        if thorough and name != out and array.size:
            now = np.empty_like(array)
            cl.enqueue_copy(handle.queue, now, buffers[name], is_blocking=True)
            if not np.array_equal(now, array):
                failures.append(f"{where}: modified its input {name!r}")
    last_byte = -1
    if scratch is not None:
        used = guarded.changed(handle, scratch, 0, scratch.size)
        last_byte = int(used[-1]) + 3 if used.size else -1   # the last word's last byte
        if last_byte >= workspace:
            failures.append(f"{where}: wrote past its workspace ({workspace} bytes reported, byte "
                            f"{last_byte} written)")
    if not thorough:
        return failures, last_byte
    if plugins.solver_attribute(solver, "deterministic"):
        buffers = guarded.tensors(handle, host, blank=(out,))
        invoker(Buffers(**buffers), scratch)
        if not np.array_equal(read_output(handle, problem, buffers), first, equal_nan=True):
            failures.append(f"{where}: claims to be deterministic but two runs differ")
    failures += _check_nonfinite(handle, problem, invoker, host, scratch, tolerance, where,
                                 plugins.solver_attribute(solver, "nonfinite"))
    return failures, last_byte


#: Where check_solver plants non-finite values, per direction: (tensor, flat index, value).  The
#: first elements meet the zero padding through the first filter tap.
_PLANTED = {
    Direction.FORWARD: (("w", 0, np.inf), ("x", -1, np.nan)),
    Direction.BACKWARD_DATA: (("w", 0, -np.inf), ("y", 0, np.nan)),
    Direction.BACKWARD_WEIGHTS: (("x", 0, np.inf), ("y", -1, np.nan)),
}


def nonfinite_reach(problem, inputs):
    """The outputs that non-finite values of ``inputs`` (tensors by name) reach through the
    products, whole planes: forward y[n, k of c's group] for x[n, c] and y[:, k] for w[k, c];
    backward-data dx[n, c of k's group] for dy[n, k] and dx[:, c] for w[k, c]; backward-weights
    dw[k of c's group, c] for x[n, c] and dw[k] for dy[n, k]: where nonfinite = "spread" allows
    non-finite outputs the reference does not have."""
    g, c, k, d = problem.groups, problem.c, problem.k, problem.direction
    spatial = tuple(range(2, problem.spatial_dims + 2))   # in logical order (any layout)
    x, w, dy = (~np.isfinite(reference.logical(getattr(problem, name), inputs[name])).all(
        axis=spatial) for name in "xwy")
    if d is Direction.FORWARD:            # (N, C), (K, C/G) -> (N, K)
        planes = np.repeat(x.reshape(len(x), g, c // g).any(2), k // g, 1) | w.any(1)
    elif d is Direction.BACKWARD_DATA:    # (N, K), (K, C/G) -> (N, C)
        planes = (np.repeat(dy.reshape(len(dy), g, k // g).any(2), c // g, 1)
                  | w.reshape(g, k // g, c // g).any(1).reshape(-1))
    else:                                 # (N, C), (N, K) -> (K, C/G)
        planes = np.repeat(x.any(0).reshape(g, c // g), k // g, 0) | dy.any(0)[:, None]
    out = getattr(problem, d.output)
    return reference.in_memory(out, np.broadcast_to(planes[(..., *[None] * len(spatial))],
                                                    out.shape))


def _check_nonfinite(handle, problem, invoker, host, scratch, tolerance, where, mode="exact"):
    """Failures of the non-finite semantics: with an inf and a NaN planted in the inputs, the
    output must have NaN and +-inf exactly where the float64 reference has them (``mode``
    "exact"), or (``"spread"``) be non-finite at least there and nowhere out of their reach
    (nonfinite_reach); outputs finite on both sides must match within tolerance."""
    planted = {name: array.copy() for name, array in host.items()}
    for name, index, value in _PLANTED[problem.direction]:
        if planted[name].size:
            planted[name].flat[index] = value
    buffers = guarded.tensors(handle, planted, blank=(problem.direction.output,))
    cl.wait_for_events(invoker(Buffers(**buffers), scratch))
    result = read_output(handle, problem, buffers)
    with np.errstate(invalid="ignore"):
        expected = expected_output(problem, planted)
        why = reference.mismatch(result, expected, tolerance, mode)
    stray = 0 if why or mode != "spread" else int(
        (~np.isfinite(result) & ~nonfinite_reach(problem, planted)).sum())
    if stray:
        why = (f"{stray} outputs non-finite out of the non-finite inputs' reach (nonfinite = "
               "'spread' allows them only in the images and channels that share a product "
               "with one)")
    hint = " (padding must take part in the products: 0 * inf = NaN)" if mode == "exact" else ""
    return [f"{where}: non-finite inputs: {why}{hint}"] if why else []


def _spread(count, size, seed):
    """How many of ``count`` sampled configs each of ``size`` problems gets, dealt in a random
    (seeded) order of the problems, so that none gets two before each has one; and the index
    of the problem dealt the first (None when none is)."""
    order, shares = random.Random(seed).sample(range(size), size), [0] * size
    for dealt in range(count if size else 0):
        shares[order[dealt % size]] += 1
    return shares, (order[0] if count and size else None)


def check_solver(solver, handle=None, problems=None, seed=0, *, configs=3, isolate=None,
                 sanitize=None):
    """Assert that ``solver`` honours the contract; returns how many problems it was checked on.

    A solver that discovery would refuse (its plugin's CONVSOLVE_SOLVER_API, its attributes, a
    misspelt hook or argument) fails at once, in discovery's words.  Then, on each of
    ``problems`` (they replace the standard set, standard_problems(), and the problems of the
    other spatial ranks and layouts the solver claims, claimed_problems(); pass
    ``standard_problems() + [...]`` to add to it) of a direction, rank and layouts it serves:
    is_applicable must not raise; where it accepts, get_wti and workspace must be in range, the
    output must match the float64 reference within the solver's ``tolerance`` and be written
    completely, the inputs must stay untouched, nothing may be written past any tensor (a guard
    zone of NaN follows each buffer, so a read past one that reaches an output makes it NaN:
    guarded.py), the workspace it reports must be exactly enough (writes past it and workspace
    it never writes are both failures), a ``deterministic`` solver must give bitwise-equal
    results twice, and with an inf and a NaN planted in the inputs the output must be
    non-finite exactly where the reference's is (nonfinite = "spread": there, and elsewhere
    only in the planes that share a product with a non-finite input).  A run still going after
    RUN_LIMIT_S fails as hung and ends the check (the device queue stays blocked).

    A tunable solver is checked so with its default config (which must be valid) on every
    problem, and with ``configs`` runs of other valid configs drawn at random from its config
    space, dealt to problems drawn at random (none gets two before each has one), so that the
    cost stays that of a few problems more; ``configs=m * len(problems)`` checks ``m`` random
    configs on every problem.  The first of them gets every check; the others one run each,
    held to the reference and to the workspace.  ``seed`` seeds the draws, as it does the
    tensors.  Configs its check_config refuses are left out; each failure names its config.

    ``isolate=True`` checks in a worker process on the same device, so that a kernel that kills
    the process (a write far past a buffer corrupting the heap) is a failure naming the problem,
    the config and the signal; the worker sees the caller's CONVSOLVE_* variables and sys.path,
    not Python-level monkeypatches, and needs a picklable solver.  In process, a crash is named
    on stderr by a watcher process.  ``sanitize=True`` checks in workers on Oclgrind, as a CPU
    and as a GPU, with its memory and data-race checks (``problems`` default to
    sanitized_problems()); any report fails, quoted with its problem and config, and the test
    is skipped when Oclgrind is not installed (``pip install 'pyopencl[oclgrind]'``).  None
    takes the session's choice: ``pytest --convsolve-isolate`` / ``--convsolve-sanitize``.
    Raises AssertionError listing every failure.
    """
    refusal = plugins.contract_refusal(solver)
    if refusal:
        raise AssertionError(f"{getattr(solver, 'name', solver)!r} fails check_solver: "
                             f"discovery refuses it: {refusal}")
    sanitize = _session["sanitize"] if sanitize is None else sanitize
    isolate = _session["isolate"] if isolate is None else isolate
    if handle is None and not sanitize:
        raise TypeError("check_solver needs a handle (the `handle` fixture) unless sanitize=True")
    if problems is None:
        problems = ((sanitized_problems() if sanitize else standard_problems())
                    + claimed_problems(solver))
    failures = []
    accepted = _accepted(solver, problems, failures)
    cases = epilogue_cases.plan(accepted, sanitize)
    shares, first = _spread(configs, len(accepted), seed)
    jobs = [(problem, count, cases.get(problem.key(), ()), int(index == first))
            for index, (problem, count) in enumerate(zip(accepted, shares))]
    if jobs and sanitize:
        isolation.oclgrind_or_skip()
        failures += isolation.check_in_workers(
            solver, jobs, seed, [("oclgrind", p) for p in isolation.PROFILES])
    elif jobs and isolate:
        failures += isolation.check_in_workers(solver, jobs, seed,
                                               [isolation.device_target(handle)])
    elif jobs:
        failures += _check_in_process(solver, handle, jobs, seed)
    if not accepted and not failures:
        failures.append("applicable to none of the problems checked")
    if failures:
        raise AssertionError(f"{solver.name} fails check_solver:\n  " + "\n  ".join(failures))
    return len(accepted)


def _accepted(solver, problems, failures):
    """The problems of ``solver``'s directions, spatial ranks and layouts that it is_applicable
    to; a raise is a failure."""
    accepted = []
    for problem in problems:
        if problem.direction not in solver.directions or plugins.shape_refusal(solver, problem):
            continue
        try:
            if solver.is_applicable(problem):
                accepted.append(problem)
        except Exception as exc:  # noqa: BLE001
            failures.append(f"{problem.key()}: is_applicable raised {exc!r}")
    return accepted


def _check_in_process(solver, handle, jobs, seed):
    """check_solver's failures of ``solver`` on ``jobs`` in this process, the watcher told which
    run is on; a run past RUN_LIMIT_S ends the check (the queue stays blocked)."""
    failures = []
    try:
        for problem, count, epilogues, thorough in jobs:
            failures += check_problem(
                solver, handle, problem, seed, count, lambda problem, config: _running(
                    f"{solver.name!r} on {isolation.label(problem.key(), config)}"),
                epilogues, thorough, RUN_LIMIT_S)
    except guarded.Hung as hung:   # the queue is blocked: no later run could finish
        failures.append(str(hung))
    finally:
        _running("")
    return failures

# }}}
