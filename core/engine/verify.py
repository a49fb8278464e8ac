"""Checking what a solver wrote: NaN/Inf scans and a sampled comparison with the reference.

find uses both on every candidate it times (the sampled comparison under ``verify=True``);
run() scans inputs and output under CONVSOLVE_CHECK_NUMERICS.
"""
import logging
import math

import numpy as np

from .. import reference
from ..device.tensors import read_tensor
from ..errors import NumericsError

log = logging.getLogger("convsolve")

#: Output elements a verified find compares with the reference (all of them when fewer).
VERIFY_SAMPLES = 1024

#: Past this many bytes of float64 padded input, the driver's verification samples elements.
WHOLE_REFERENCE_BYTES = 256 << 20


def read(handle, problem, buffers, name):
    """Host copy of tensor ``name`` ('x', 'w' or 'y') of ``problem`` from ``buffers``."""
    return read_tensor(handle, getattr(problem, name), getattr(buffers, name))


def nonfinite(array):
    """'3 NaN, 1 inf' for an array with non-finite values, else None."""
    nan, inf = int(np.isnan(array).sum()), int(np.isinf(array).sum())
    return f"{nan} NaN, {inf} inf" if nan or inf else None


def sample_index(problem):
    """Flat indices of the output elements checked: all, or VERIFY_SAMPLES fixed random ones."""
    size = getattr(problem, problem.direction.output).size
    if size <= VERIFY_SAMPLES:
        return np.arange(size)
    return np.sort(np.random.default_rng(0).choice(size, VERIFY_SAMPLES, replace=False))


def error_against_reference(problem, host, output, **values):
    """Relative RMS error of ``output`` against the reference for the host inputs (and an
    epilogue's ``values``, as reference.compute takes them): over every element, or over
    sampled ones when the whole reference would pad more than WHOLE_REFERENCE_BYTES of float64
    input (the driver's -V on huge paddings)."""
    padded = problem.n * problem.c * math.prod(
        size + lo + hi for size, (lo, hi) in zip(problem.in_sizes, problem.conv.pads)) * 8
    if padded <= WHOLE_REFERENCE_BYTES:
        return reference.relative_error(output, reference.compute(problem, **host, **values))
    index = sample_index(problem)
    expected = reference.compute_at(problem, host["x"], host["w"], host["y"], index, **values)
    return reference.relative_error(output.ravel()[index], expected)


def _inputs(problem):
    return [name for name in ("x", "w", "y") if name != problem.direction.output]


class OutputCheck:
    """What find holds each candidate's output to; made once per find from the inputs."""

    def __init__(self, handle, problem, buffers, verify):
        self.handle, self.problem, self.buffers = handle, problem, buffers
        self._finite_inputs = None   # read lazily: only a non-finite output needs them
        self.index = self.expected = None
        if verify:
            host = {name: read(handle, problem, buffers, name) for name in _inputs(problem)}
            self.index = sample_index(problem)
            with np.errstate(invalid="ignore", over="ignore"):
                self.expected = reference.compute_at(problem, host.get("x"), host.get("w"),
                                                     host.get("y"), self.index)

    def _inputs_finite(self):
        if self._finite_inputs is None:
            self._finite_inputs = all(
                np.isfinite(read(self.handle, self.problem, self.buffers, name)).all()
                for name in _inputs(self.problem))
        return self._finite_inputs

    def fault(self, tolerance):
        """Why the output now in the buffers is wrong, or None: non-finite values from finite
        inputs, or (verifying) sampled values off the reference by ``tolerance`` or more."""
        out = read(self.handle, self.problem, self.buffers, self.problem.direction.output)
        bad = nonfinite(out)
        if bad and self._inputs_finite():
            return f"wrote {bad} from finite inputs"
        if self.index is None:
            return None
        got, expected = out.ravel()[self.index], self.expected
        for test in (np.isnan, np.isposinf, np.isneginf):
            if not np.array_equal(test(got), test(expected)):
                return (f"wrong result: non-finite outputs differ from the reference on "
                        f"{self.index.size} sampled elements")
        finite = np.isfinite(expected)
        error = reference.relative_error(got[finite], expected[finite])
        if not error < tolerance:
            return (f"wrong result: relative error {error:.3g} >= {tolerance:g} on "
                    f"{self.index.size} sampled elements")
        return None


def check_numerics(handle, problem, buffers, solver_name, strict):
    """Report NaN/inf in the inputs and the output of a finished run, naming tensor and solver;
    ``strict`` raises NumericsError instead of logging a warning."""
    for name in ("x", "w", "y"):
        if getattr(buffers, name) is None:
            continue
        bad = nonfinite(read(handle, problem, buffers, name))
        if bad:
            role = "output" if name == problem.direction.output else "input"
            message = (f"numerics: {role} {name!r} of {problem.key()} holds {bad} "
                       f"({'after' if role == 'output' else 'before'} {solver_name!r})")
            if strict:
                raise NumericsError(message)
            log.warning("%s", message)
