"""check_solver's epilogue checks, for solvers that declare ``fused_stages``: each fused part
against the float64 reference and against the core's unfused pass, with edge values.

For a few problems the solver accepts (2-D NCHW: two per direction, the second with the cases
that touch other memory only, on Oclgrind one, with those; each other spatial rank and output
layout it claims: one per direction, with SHAPE_CASES, not on Oclgrind), each case of CASES that
the solver fuses at least one stage of runs fused and unfused, in process or in check_solver's
workers alike, on guarded buffers (guarded.py: on a device a guard zone of NaN follows each
tensor, operand and workspace, so a read past one shows as NaN and a write there is a failure
naming the buffer; on Oclgrind each has its exact size); a fused result must match the reference
(its NaN and inf exactly) within the solver's tolerance, and the unfused one within the same
tolerance. For a solver with nonfinite = "spread" the reference takes, where the solver's own
bare convolution is not finite, the epilogue of that value instead. The cases hold the edges of
the semantics: alpha 0 (the convolution unread: a NaN planted in the input must not show) and
negative, beta 0 with a NaN-filled output (unread), z being the output's own buffer, activation
parameters at their limits (leaky relu a = 0, elu a = 0), infinities through relu (never 0 *
inf).
"""
import numpy as np

from .. import reference
from ..device.tensors import random_tensors, read_tensor
from ..engine.fusion import Candidate
from ..epilogue import Activation, Epilogue, EpilogueArgs
from ..errors import ContractError
from ..hookspecs import Buffers
from ..problem import Direction
from ..solvers.calls import build_invoker, events_of, fused_stages_of, fusing_hook, workspace_of
from ..solvers.registry import solver_attribute
from . import guarded

#: (label, structure, values, how: 'nan-y' the prior output NaN, 'inf' an inf planted in the
#: weights, 'nan-x' a NaN planted in the input, 'alias' z is the output's buffer).
CASES = {
    Direction.FORWARD: [
        ("alpha<0", Epilogue(), {"alpha": -1.5}, "nan-y"),
        ("bias+relu, inf in w", Epilogue(bias=True, activation="relu"), {}, "inf"),
        ("all, beta=0, leaky a=0", Epilogue(True, True, True, "leaky_relu", True),
         {"alpha": 0.75, "beta": 0.0, "z_scale": -0.5, "activation": ("leaky_relu", 0.0)},
         "nan-y"),
        ("alpha=0, z is y, elu a=0", Epilogue(residual=True, activation="elu", blend=True),
         {"alpha": 0.0, "beta": 0.5, "activation": ("elu", 0.0)}, "nan-x alias"),
        ("z is y, elu, blend", Epilogue(residual=True, activation="elu", blend=True),
         {"alpha": 1.25, "beta": -0.5, "z_scale": 2.0, "activation": ("elu", 0.5)}, "alias"),
    ],
    "backward": [
        ("alpha, blend", Epilogue(blend=True), {"alpha": -2.0, "beta": 0.5}, ""),
        ("alpha=0", Epilogue(), {"alpha": 0.0}, "nan-x nan-y"),
    ],
}
#: The cases whose kernels touch other memory than the rest's: every operand read (scale, bias
#: and z apart from the output) and z being the output with its prior contents read; backward,
#: the prior output read.  The later problems of a direction run these, and a simulator
#: (Oclgrind, whose checks are of memory and races, and where each run costs seconds) only these.
MEMORY_CASES = ("all, beta=0, leaky a=0", "z is y, elu, blend", "alpha, blend")
#: The cases of the other ranks and layouts (one problem each): every forward operand read at
#: its channel or in y's layout, and the backward blend.
SHAPE_CASES = ("all, beta=0, leaky a=0", "alpha, blend")
#: Problems checked per direction (the first with every case); on Oclgrind (check_solver's
#: sanitize=True) fewer.
PROBLEMS_PER_DIRECTION = 2
SANITIZED_PROBLEMS_PER_DIRECTION = 1


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


def _run(handle, candidate, problem, inputs, how, where, limit_s):
    """The candidate's output on fresh guarded buffers (None when it failed to run) and its
    failures: a failure to run, writes past a buffer or past its workspace."""
    (host, arrays, z, values), structure = inputs, problem.epilogue
    out = problem.direction.output
    device = guarded.tensors(handle, host)
    operands = {name: array for name, array, present in (
        ("scale", arrays["scale"], structure.scale), ("bias", arrays["bias"], structure.bias),
        ("z", z, structure.residual and "alias" not in how)) if present}
    extra = guarded.tensors(handle, operands)
    args = EpilogueArgs(values.get("alpha", 1.0), values.get("beta", 0.0),
                        values.get("z_scale", 1.0), Activation.parse(
                            values.get("activation"), structure.activation),
                        extra.get("scale"), extra.get("bias"),
                        device[out] if structure.residual and "alias" in how else extra.get("z"))
    need = candidate.workspace(problem, handle)
    scratch = guarded.allocate(handle, need) if need else None
    try:
        invoker = candidate.build_invoker(problem, handle)
        guarded.finish(events_of(candidate.name, invoker(
            Buffers(**device).with_epilogue_args(args), scratch)), limit_s, where)
    except guarded.Hung:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure to run is a finding
        return None, [f"{where}: failed to build or run: {exc!r}"]
    sizes = {name: array.nbytes for name, array in {**host, **operands}.items()}
    failures = guarded.overruns(handle, {**device, **extra}, sizes, out, where)
    past = guarded.changed(handle, scratch, need, scratch.size) if need else []
    if len(past):
        failures.append(f"{where}: wrote past its workspace ({need} bytes, byte {past[0]} "
                        "written)")
    return read_tensor(handle, getattr(problem, out), device[out]), failures


def _own_expected(handle, solver, problem, inputs, expected, limit_s):
    """For a solver whose transforms spread non-finite inputs: ``expected`` where its own bare
    convolution is finite, and the float64 epilogue of its own (non-finite) value elsewhere."""
    (host, arrays, z, values), bare = inputs, problem.with_epilogue(None)
    buffers = guarded.tensors(handle, host)
    need = workspace_of(solver, bare, handle)
    scratch = guarded.allocate(handle, need) if need else None
    invoker = build_invoker(solver, bare, handle)
    guarded.finish(events_of(solver.name, invoker(Buffers(**buffers), scratch)), limit_s,
                   bare.key())
    conv = read_tensor(handle, getattr(bare, bare.direction.output),
                       buffers[bare.direction.output])
    with np.errstate(all="ignore"):
        own = reference.epilogue(problem, conv, host[problem.direction.output], **arrays, z=z,
                                 **values)
    return np.where(np.isfinite(conv), expected, own)


def _check_case(solver, handle, problem, case, seed, progress, limit_s):
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
    inputs = (host, arrays, z, values)
    with np.errstate(all="ignore"):
        expected = reference.compute(problem, *(host[n] for n in "xwy"), scale=arrays["scale"],
                                     bias=arrays["bias"], z=z, **values)
    tolerance, failures = solver_attribute(solver, "tolerance"), []
    if solver_attribute(solver, "nonfinite") == "spread":
        expected = _own_expected(handle, solver, problem, inputs, expected, limit_s)
    for candidate in (Candidate(solver, fused, solver.name),
                      Candidate(solver, 0, f"{solver.name}/unfused")):
        where = (f"{problem.key()} ({label}), {candidate.name} fusing {candidate.fused} "
                 "stages")
        result, found = _run(handle, candidate, problem, inputs, how, where, limit_s)
        with np.errstate(invalid="ignore"):   # guarded.PATTERN is a signalling NaN
            why = None if result is None else reference.mismatch(result, expected, tolerance)
        failures += found + ([f"{where}: {why}"] if why else [])
    return failures


def plan(problems, sanitize=False):
    """{problem key: the labels of the cases check_solver runs on it} for the problems of
    ``problems`` it checks epilogues on.  2-D NCHW, per direction, the first
    PROBLEMS_PER_DIRECTION (on Oclgrind, ``sanitize``, SANITIZED_PROBLEMS_PER_DIRECTION) in
    this order: grouped ones with several output channels (a channel's scale and bias then sit
    at a group's offset), the others with several, the rest; the first takes every case, the
    others (and every one on Oclgrind) MEMORY_CASES.  Every other spatial rank and output
    layout among ``problems`` (claimed_problems: the ranks and layouts a solver claims; the
    epilogue reads y's layout alone), per direction, its first problem in that order with
    SHAPE_CASES; none on Oclgrind, where each run costs seconds: its epilogue cases stay 2-D
    NCHW's."""
    def order(problem):
        channels = getattr(problem, problem.direction.output).shape[1]
        return channels == 1, problem.groups == 1
    every = tuple(label for cases in CASES.values() for label, *_ in cases)
    per_direction = SANITIZED_PROBLEMS_PER_DIRECTION if sanitize else PROBLEMS_PER_DIRECTION
    found, groups = {}, {}
    for problem in sorted(problems, key=order):
        shape = "2-D NCHW" if problem.is_2d_nchw else (problem.spatial_dims, problem.y.layout)
        groups.setdefault((problem.direction, shape), []).append(problem)
    for (_, shape), own in groups.items():
        if shape != "2-D NCHW":   # on Oclgrind none
            found.update({} if sanitize else {own[0].key(): SHAPE_CASES})
            continue
        for index, problem in enumerate(own[:per_direction]):
            found[problem.key()] = every if index == 0 and not sanitize else MEMORY_CASES
    return found


def failures(solver, handle, problem, seed=0, progress=None, cases=None, limit_s=None):
    """check_solver's epilogue findings for ``solver`` on ``problem``, which it accepts: the
    cases of its direction labelled in ``cases`` (None: every one); none when the solver has no
    ``fused_stages`` hook.  ``progress(problem, None)`` is called with the case's problem
    before each case runs; a run still going after ``limit_s`` seconds raises guarded.Hung."""
    if fusing_hook(solver) is None:
        return []
    found = []
    for case in CASES.get(problem.direction, CASES["backward"]):
        if cases is None or case[0] in cases:
            found += _check_case(solver, handle, problem, case, seed, progress, limit_s)
    return found
