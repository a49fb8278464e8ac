"""A call's checks (handle, problem, buffers, scratch, device limits) and choosing its solver by
name or family; plan.py runs it."""
import pyopencl as cl

from ..db.find_db import FindDb
from ..device.handle import Handle
from ..device.tensors import array_buffer, is_device_array
from ..errors import SolverError, ValidationError
from ..hookspecs import Buffers
from ..problem import Direction, Problem
from ..solvers.policy import Policy
from ..solvers.registry import registry
from ..text import format_bytes
from . import fusion


def check_handle(handle):
    """``handle`` checked to be a convsolve.Handle."""
    if not isinstance(handle, Handle):
        raise ValidationError("handle", type(handle).__name__, "expected a convsolve.Handle")
    return handle


def check_problem(problem):
    """``problem`` checked to be a convsolve.Problem."""
    if not isinstance(problem, Problem):
        raise ValidationError("problem", type(problem).__name__, "expected a convsolve.Problem")
    return problem


def check_solver_argument(solver):
    """``solver`` checked to be a name (of a solver or a family)."""
    if not isinstance(solver, str):
        raise ValidationError("solver", solver, "expected a solver name or a family")
    return solver


def check_buffers(problem, x, w, y, handle=None):
    """The three buffers as Buffers, each an OpenCL buffer at least as large as its tensor and,
    given ``handle``, of its context; a pyopencl Array stands for its buffer (checked for
    dtype, shape, contiguity and context: tensors.array_buffer).

    With a zero batch, ``x`` and ``y`` may be None (OpenCL has no empty buffers).  The output's
    buffer may not also be an input's: work-items would read what others already wrote.  Every
    plan.run calls it, so it is written out for speed (2 us for three buffers, AVX-512 Xeon).
    """
    check_problem(problem)
    context = None if handle is None else handle.context
    x = _check_buffer("x", x, problem.x, handle, context)
    w = _check_buffer("w", w, problem.w, handle, context)
    y = _check_buffer("y", y, problem.y, handle, context)
    direction = problem.direction   # (compared as members: Direction.output costs 0.13 us)
    if direction is Direction.FORWARD:
        written, read, also_read = y, x, w
    elif direction is Direction.BACKWARD_DATA:
        written, read, also_read = x, w, y
    else:
        written, read, also_read = w, x, y
    if written is not None and (written == read or written == also_read):
        raise ValidationError(direction.output, "an input's buffer",
                              f"{direction.label} writes it: give it a buffer of its own")
    return Buffers(x, w, y)


_SIZE, _CONTEXT = cl.mem_info.SIZE, cl.mem_info.CONTEXT


def _check_buffer(name, buffer, desc, handle, context):
    """``buffer`` for tensor ``name`` (a TensorDesc ``desc``) as an OpenCL buffer (a pyopencl
    Array's, checked by tensors.array_buffer), refused when missing, of another type, smaller
    than the tensor or, given a handle, not of its ``context``."""
    if buffer is None:
        if desc.nbytes:
            raise ValidationError(name, None, f"a device buffer of {desc.nbytes} bytes is required")
        return None
    if not isinstance(buffer, cl.Buffer):
        if is_device_array(buffer):
            return array_buffer(name, buffer, desc.memory_shape, handle)
        raise ValidationError(name, type(buffer).__name__,
                              "expected a pyopencl.Buffer or pyopencl.array.Array")
    if buffer.get_info(_SIZE) < desc.nbytes:   # get_info: 0.1 us less than .size and .context
        raise ValidationError(f"{name} buffer size", buffer.size,
                              f"tensor {desc.shape} {desc.dtype} needs {desc.nbytes} bytes")
    if context is not None and buffer.get_info(_CONTEXT) != context:
        _check_context(name, buffer, handle)
    return buffer


def _check_context(name, buffer, handle):
    """Refuse ``buffer`` (argument ``name``) when it belongs to another context than ``handle``'s
    (no check without a handle)."""
    if handle is not None and buffer.context != handle.context:
        raise ValidationError(name, "a buffer of another context",
                              f"make it in handle.context ({handle.name})")


def check_device_limits(handle, *problems):
    """Refuse problems whose tensors cannot be on ``handle``'s device: each within its largest
    buffer (max_mem_alloc_size), the three together within its global memory.

    find and the numpy API call it before allocating anything, the CLI before making host
    tensors.  run needs no call: buffers at least as large as the tensors already exist.
    """
    for problem in problems:
        check_tensors_fit(handle, {name: getattr(problem, name) for name in "xwy"})


def check_tensors_fit(handle, tensors):
    """Refuse ``tensors`` ({name: TensorDesc}) that cannot be on ``handle``'s device at once:
    each within its largest buffer, all together within its global memory (ValidationErrors
    naming the tensor, or the names joined by '+', with the bytes and the limit)."""
    device = handle.device

    def limit(what, info, nbytes):
        return (f"{what} over the device's {info}, {nbytes} bytes ({format_bytes(nbytes)}), "
                f"on {handle.name}")
    for name, desc in tensors.items():
        if desc.nbytes > device.max_mem_alloc_size:
            raise ValidationError(f"{name} bytes", desc.nbytes, limit(
                f"tensor {name} {desc.shape} {desc.dtype} is", "largest buffer "
                "(max_mem_alloc_size)", device.max_mem_alloc_size))
    total = sum(desc.nbytes for desc in tensors.values())
    if total > device.global_mem_size:
        raise ValidationError(f"{' + '.join(tensors)} bytes", total, limit(
            "the tensors together are", "global memory (global_mem_size)",
            device.global_mem_size))


def check_scratch(scratch, needed, solver_name, handle=None):
    """``scratch`` checked to hold ``needed`` bytes for ``solver_name`` (and, given ``handle``,
    to be of its context)."""
    if scratch is not None and not isinstance(scratch, cl.Buffer):
        raise ValidationError("scratch", type(scratch).__name__,
                              "expected a pyopencl.Buffer or None")
    if scratch is not None:
        _check_context("scratch", scratch, handle)
    have = scratch.size if scratch is not None else 0
    if have < needed:
        raise ValidationError("scratch", have, f"{solver_name!r} needs {needed} bytes")
    return scratch


def resolve_solver(handle, problem, solver, policy=None):
    """The solver object for ``solver``: a solver name, or a family whose best find remembered
    under the numerical ``policy`` (None: the environment's).

    Raises SolverError when it is not installed, disabled, left out by the policy, not
    applicable to ``problem`` or excluded there by an erratum for the handle's device.
    """
    check_handle(handle)
    check_problem(problem)
    check_solver_argument(solver)
    policy = policy or Policy.resolve()
    reg = registry()
    name = solver
    if fusion.solver_of(solver) not in reg.solvers:
        name = handle.best_of_family(policy.db_key(problem), solver)
        if name is None:
            family_records = [r for r in FindDb().records(handle.db_key, policy.db_key(problem))
                              if r.family == solver and not r.failure
                              and fusion.solver_of(r.solver) in reg.solvers]
            if not family_records:
                families = {s.family for s in reg.solvers.values()}
                if solver in families:
                    raise SolverError(f"no {solver!r} solver was found for {problem.key()}: "
                                      "run find first, or name a solver")
                reg.get(solver)  # raises: neither a solver nor a family
            name = family_records[0].solver
    if problem.epilogue is not None or name.endswith((fusion.NCHW, fusion.AS_2D)):  # candidate
        reg.enabled(fusion.solver_of(name))   # says which switch turned it off
        return fusion.resolve(problem, name, policy, handle.device.name)
    chosen = reg.enabled(name)
    applicable, skipped = fusion.candidates(problem, policy, handle.device.name)
    if chosen not in applicable:
        raise SolverError(f"solver {name!r} cannot run {problem.key()}: {skipped[name]}")
    return chosen
