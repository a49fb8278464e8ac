"""Opt-in pytest plugin for solver tests: a device handle, isolated find-dbs, buffers and the reference.

Enable it with ``pytest_plugins = ["convsolve.testing"]`` in a top-level conftest.py, or ``-p
convsolve.testing``.  ``CONVSOLVE_TEST_DEVICE`` picks the device (as CONVSOLVE_DEVICE does).
"""
import os

import numpy as np
import pyopencl as cl
import pytest

from . import plugins, reference
from .handle import Handle

#: Relative RMS error against the float64 reference that float32 solvers must stay under.
FLOAT32_TOLERANCE = 1e-5
_OUTPUT = {"fwd": "y", "bwd": "x", "wrw": "w"}


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
    return Handle(os.environ.get("CONVSOLVE_TEST_DEVICE") or None)


@pytest.fixture
def handle(convsolve_session_handle):
    """The session's Handle, with find's memory of earlier tests' problems dropped."""
    convsolve_session_handle.best.clear()
    return convsolve_session_handle


def random_tensors(problem, seed=0):
    """{'x', 'w', 'y'}: float32 host arrays, uniform in [-1, 1], for ``problem``'s shapes."""
    rng = np.random.default_rng(seed)
    return {name: rng.uniform(-1, 1, getattr(problem, name).shape).astype(np.float32)
            for name in ("x", "w", "y")}


def device_buffers(handle, host):
    """Device copies of the host arrays (None for an empty one)."""
    flags = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
    return {name: cl.Buffer(handle.context, flags, hostbuf=array) if array.size else None
            for name, array in host.items()}


def read_output(handle, problem, buffers):
    """Host copy of the tensor ``problem``'s direction writes (waits for the queue)."""
    name = _OUTPUT[problem.direction.value]
    out = np.empty(getattr(problem, name).shape, np.float32)
    if out.size:
        cl.enqueue_copy(handle.queue, out, buffers[name])
    return out


def expected_output(problem, host):
    """The float64 reference output of ``problem`` for the host arrays."""
    return reference.compute(problem, **host)
