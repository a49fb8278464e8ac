"""check_solver's epilogue checks, for solvers that declare ``fused_epilogue``: each fused part
against the float64 reference and against the core's unfused pass, with edge values.

For a few problems the solver accepts (two per direction, one on Oclgrind), each case of CASES
that the solver fuses at least one stage of runs fused and unfused on guarded NaN-filled buffers,
in process or in check_solver's workers alike; a fused result must match the reference (its NaN and inf exactly) within the solver's tolerance, and the
unfused one within the same tolerance.  The cases hold the edges of the semantics: alpha 0 (the
convolution unread: a NaN planted in the input must not show) and negative, beta 0 with a
NaN-filled output (unread), z being the output's own buffer, activation parameters at their
limits (leaky relu a = 0, clipped relu a = 0), infinities through relu (never 0 * inf).
"""
import numpy as np
import pyopencl as cl

from . import reference
from .calls import events_of, fused_stages_of
from .epilogue import Activation, Epilogue, EpilogueArgs
from .errors import ContractError
from .fusion import Candidate
from .hookspecs import Buffers
from .plugins import solver_attribute
from .problem import Direction
from .tensors import random_tensors, read_tensor

#: (label, structure, values, how: 'nan-y' the prior output NaN, 'inf' an inf planted in the
#: weights, 'nan-x' a NaN planted in the input, 'alias' z is the output's buffer).
CASES = {
    Direction.FORWARD: [
        ("alpha<0", Epilogue(), {"alpha": -1.5}, "nan-y"),
        ("bias+relu, inf in w", Epilogue(bias=True, activation="relu"), {}, "inf"),
        ("all, beta=0, leaky a=0", Epilogue(True, True, True, "leaky_relu", True),
         {"alpha": 0.75, "beta": 0.0, "z_scale": -0.5, "activation": ("leaky_relu", 0.0)},
         "nan-y"),
        ("alpha=0, z is y, clipped a=0", Epilogue(residual=True, activation="clipped_relu",
                                                  blend=True),
         {"alpha": 0.0, "beta": 0.5, "activation": ("clipped_relu", 0.0)}, "nan-x alias"),
        ("z is y, elu, blend", Epilogue(residual=True, activation="elu", blend=True),
         {"alpha": 1.25, "beta": -0.5, "z_scale": 2.0, "activation": ("elu", 0.5)}, "alias"),
    ],
    "backward": [
        ("alpha, blend", Epilogue(blend=True), {"alpha": -2.0, "beta": 0.5}, ""),
        ("alpha=0", Epilogue(), {"alpha": 0.0}, "nan-x nan-y"),
    ],
}
#: Problems checked per direction; on Oclgrind (check_solver's sanitize=True), where each run
#: costs seconds, fewer.
PROBLEMS_PER_DIRECTION = 2
SANITIZED_PROBLEMS_PER_DIRECTION = 1


def _buffer(handle, array):
    flags = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
    return cl.Buffer(handle.context, flags, hostbuf=np.ascontiguousarray(array, np.float32))


def _inputs(problem, values, how, seed):
    """Host tensors (the output's: its prior contents) and the epilogue's arrays for a case."""
    host = random_tensors(problem, seed)
    out, rng = problem.direction.output, np.random.default_rng(seed + 1)
    inputs = [name for name in "xwy" if name != out]
    if "inf" in how:
        host["w"].flat[0] = np.inf
    if "nan-x" in how:
        host[inputs[0]].flat[-1] = np.nan
    if "nan-y" in how:
        host[out][...] = np.nan
    channels = getattr(problem, out).shape[1]
    arrays = {"scale": rng.uniform(-2, 2, channels).astype(np.float32),
              "bias": rng.uniform(-1, 1, channels).astype(np.float32)}
    arrays["scale"][0] = 0.0
    z = host[out] if "alias" in how else rng.uniform(-1, 1, host[out].shape).astype(np.float32)
    return host, arrays, z


def _run(handle, candidate, problem, host, arrays, z, values, how):
    """The candidate's output on fresh buffers, or the reason it failed to run."""
    structure, out = problem.epilogue, problem.direction.output
    device = {name: _buffer(handle, array) for name, array in host.items()}
    args = EpilogueArgs(values.get("alpha", 1.0), values.get("beta", 0.0),
                        values.get("z_scale", 1.0), Activation.parse(
                            values.get("activation"), structure.activation),
                        _buffer(handle, arrays["scale"]) if structure.scale else None,
                        _buffer(handle, arrays["bias"]) if structure.bias else None,
                        None if not structure.residual else device[out] if "alias" in how
                        else _buffer(handle, z))
    need = candidate.workspace(problem)
    scratch = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, need) if need else None
    try:
        invoker = candidate.build_invoker(problem, handle)
        cl.wait_for_events(events_of(candidate.name, invoker(
            Buffers(**device).with_epilogue(args), scratch)))
    except Exception as exc:  # noqa: BLE001 - any failure to run is a finding
        return None, f"failed to build or run: {exc!r}"
    return read_tensor(handle, getattr(problem, out), device[out]), None


def _compare(result, expected, tolerance):
    """Why ``result`` is not ``expected`` within ``tolerance`` (non-finite values exactly), or
    None."""
    for what, test in (("NaN", np.isnan), ("+inf", np.isposinf), ("-inf", np.isneginf)):
        if not np.array_equal(test(result), test(expected)):
            return (f"{int(test(result).sum())} {what} where the reference has "
                    f"{int(test(expected).sum())}")
    finite = np.isfinite(expected)
    error = reference.relative_error(result[finite], expected[finite])
    return None if error < tolerance else f"relative error {error:.3g} >= {tolerance:g}"


def _check_case(solver, handle, problem, case, seed, progress):
    label, structure, values, how = case
    problem = problem.with_epilogue(structure)
    try:
        fused = fused_stages_of(solver, problem)
    except ContractError as exc:
        return [f"{problem.key()}: {exc.reason}"]
    if not fused:
        return []
    if progress:
        progress(problem, None)
    host, arrays, z = _inputs(problem, values, how, seed)
    with np.errstate(all="ignore"):
        expected = reference.compute(problem, *(host[n] for n in "xwy"), scale=arrays["scale"],
                                     bias=arrays["bias"], z=z, **values)
    tolerance, failures = solver_attribute(solver, "tolerance"), []
    for candidate in (Candidate(solver, fused, solver.name),
                      Candidate(solver, 0, f"{solver.name}/unfused")):
        result, error = _run(handle, candidate, problem, host, arrays, z, values, how)
        why = error or _compare(result, expected, tolerance)
        if why:
            failures.append(f"{problem.key()} ({label}), {candidate.name} fusing "
                            f"{candidate.fused} stages: {why}")
    return failures


def chosen(problems, per_direction=PROBLEMS_PER_DIRECTION):
    """The problems of ``problems`` that check_solver runs the epilogue cases on: the first
    ``per_direction`` of each direction."""
    taken, found = {}, []
    for problem in problems:
        if taken.setdefault(problem.direction, 0) < per_direction:
            taken[problem.direction] += 1
            found.append(problem)
    return found


def failures(solver, handle, problem, seed=0, progress=None):
    """check_solver's epilogue findings for ``solver`` on ``problem``, which it accepts: every
    case of its direction; none when the solver has no ``fused_epilogue`` hook.
    ``progress(problem, None)`` is called with the case's problem before each case runs."""
    if not callable(getattr(solver, "fused_epilogue", None)):
        return []
    found = []
    for case in CASES.get(problem.direction, CASES["backward"]):
        found += _check_case(solver, handle, problem, case, seed, progress)
    return found
