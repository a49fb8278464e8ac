"""Epilogue candidates: each solver fused as far as it says, or unfused and followed by the core's
pass, for find, run, immediate mode and explain alike.

For a problem with an epilogue, every solver applicable to the bare convolution yields one or two
*candidates*, objects with the solver hooks (so find's machinery times and records them as it
does solvers).  A solver whose ``fused_stages`` answers n > 0 yields itself fused (its own name:
built for the problem with the first n stages, the core's pass doing the rest) and
``<name>/unfused``; any other solver yields itself unfused (its own name: the bare convolution,
then the pass).  When the pass still has to read the output's prior contents (blend, or a
residual z that may be the output's buffer), the solver writes into scratch first; the
candidate's workspace counts it, exactly.  A composite layout candidate (layouts.py, ``<name>/
nchw``) yields itself unfused: it computes the bare convolution into the output in the
output's own layout, then the pass applies the whole epilogue.  The pass serves every rank and
layout: channels-first, a plane per image and channel (the product of the spatial sizes);
channels-last, one element a plane, its channel the element's index modulo K.
"""
import logging
import math
from importlib import resources

import numpy as np
import pyopencl as cl

from .. import reference
from ..arith import ALIGN, ceil_div, round_up
from ..device.tensors import array_buffer, is_device_array, read_tensor
from ..device.weights_cache import build_packing
from ..epilogue import KERNEL_ARG_DTYPES, Activation, EpilogueArgs, finite
from ..errors import ContractError, SolverError, ValidationError
from ..hookspecs import OPTIONAL_SOLVER_ATTRIBUTES, Packing
from ..solvers.calls import build_invoker, events_of, fused_stages_of, workspace_of, wti_of
from ..solvers.registry import registry, solver_attribute
from .layouts import NCHW, composites
from .ranks import AS_2D, rank_candidates
from .search import config_for
from .verify import OutputCheck, read, sample_index

log = logging.getLogger("convsolve")

KERNELS = resources.files("convsolve") / "kernels"
#: The WTI of an unfused candidate is its solver's times this (the pass costs a memory sweep),
#: so that the fallback ranking prefers a fused one.
UNFUSED_WTI = 0.9
UNFUSED = "/unfused"
# NCHW ("/nchw", imported from layouts.py) is another suffix: a composite layout candidate, a
# solver serving only channels-first tensors run on channels-first copies of channels-last ones;
# AS_2D ("/2d", ranks.py) a rank candidate, a 2-D solver run on a 1-D problem as 2-D.


# {{{ run-time values

def _check_buffer(handle, name, buffer, shape):
    """``buffer`` for the epilogue's tensor ``name`` of ``shape`` as an OpenCL buffer (a
    pyopencl Array's, checked by tensors.array_buffer), refused when of another type, smaller
    than the tensor or, given a handle, of another context."""
    if is_device_array(buffer):
        return array_buffer(name, buffer, shape, handle)
    if not isinstance(buffer, cl.Buffer):
        raise ValidationError(name, type(buffer).__name__,
                              "expected a pyopencl.Buffer or pyopencl.array.Array")
    nbytes = 4 * math.prod(shape)
    if buffer.size < nbytes:
        raise ValidationError(f"{name} buffer size", buffer.size, f"needs {nbytes} bytes")
    if handle is not None and buffer.context != handle.context:
        raise ValidationError(name, "a buffer of another context", f"make it in handle.context "
                                                                   f"({handle.name})")
    return buffer


def _bare(scale, bias, z, alpha, beta, z_scale, activation):
    """Whether a call gives no epilogue value: no buffer, no activation, every scalar a plain
    number at its default."""
    return (scale is None and bias is None and z is None and activation is None
            and all(type(v) in (float, int) and v == default
                    for v, default in ((alpha, 1.0), (beta, 0.0), (z_scale, 1.0))))


def epilogue_args(problem, buffers, handle=None, *, scale=None, bias=None, z=None, alpha=1.0, beta=0.0,
           z_scale=1.0, activation=None):
    """The epilogue's run-time values for ``problem`` as EpilogueArgs (None without an epilogue),
    each checked against its structure: a part it has needs its buffer, one it lacks refuses it.

    ``buffers`` are the call's checked Buffers: z may be the output's buffer, scale and bias may
    not; every buffer holds float32 of the right size (scale and bias: one per output channel).
    """
    structure, out = problem.epilogue, problem.direction.output
    if structure is None and _bare(scale, bias, z, alpha, beta, z_scale, activation):
        return None   # the common call, answered without the checks below (find's hot path)
    alpha, beta, z_scale = finite("alpha", alpha), finite("beta", beta), finite("z_scale", z_scale)
    given = {"scale": scale, "bias": bias, "z": z}
    if structure is None:
        extra = {name: v for name, v in given.items() if v is not None}
        extra.update({name: v for name, v, default in (
            ("alpha", alpha, 1.0), ("beta", beta, 0.0), ("z_scale", z_scale, 1.0)) if v != default})
        if activation is not None and Activation.parse(activation).mode != "identity":
            extra["activation"] = activation
        if extra:
            name, value = next(iter(extra.items()))
            raise ValidationError(name, value if name in ("alpha", "beta", "z_scale", "activation")
                                  else "a buffer", f"{problem.key()} has no epilogue: give the "
                                  "Problem one (Problem.with_epilogue)")
        return None
    wanted = {"scale": structure.scale, "bias": structure.bias, "z": structure.residual}
    out_shape = getattr(problem, out).shape
    shapes = {"scale": out_shape[1:2], "bias": out_shape[1:2], "z": out_shape}
    for name, value in given.items():
        if wanted[name] and value is None and math.prod(shapes[name]):
            raise ValidationError(name, None, f"the epilogue {structure.key()!r} needs it")
        if not wanted[name] and value is not None:
            raise ValidationError(name, "a buffer", f"the epilogue {structure.key()!r} has no "
                                  f"{'residual' if name == 'z' else name}")
        if value is not None and math.prod(shapes[name]):
            value = given[name] = _check_buffer(handle, name, value, shapes[name])
            if name != "z" and value == getattr(buffers, out):
                raise ValidationError(name, f"the output {out!r}'s buffer", "give it its own")
    if beta != 0 and not structure.blend:
        raise ValidationError("beta", beta, f"the epilogue {structure.key()!r} has no blend")
    return EpilogueArgs(alpha, beta, z_scale, Activation.parse(activation, structure.activation),
                        given["scale"], given["bias"], given["z"])

# }}}


# {{{ the pass

class EpiloguePass:
    """The core's pass (kernels/epilogue.cl): the stages of ``problem.epilogue`` from stage
    number ``fused`` on, from a tensor t (the convolution, or what a solver fused) to the
    output."""

    def __init__(self, handle, problem, fused=0):
        desc = getattr(problem, problem.direction.output)
        self.queue, (images, self.channels, *spatial) = handle.queue, desc.shape
        if desc.channels_last:   # planes of one element, row r being channel r % channels
            self.plane, rows, vector = 1, desc.size, 1
        else:   # a plane per image and channel: the product of the spatial sizes
            self.plane, rows = math.prod(spatial), images * self.channels
            vector = 1 if handle.is_gpu else 8   # GPUs: coalesced, 1 each
        self.runs = ceil_div(self.plane, vector)
        self.size = (rows * self.runs,)
        self.kernel = handle.build(KERNELS / "epilogue.cl", "cs_epilogue_pass", dict(
            problem.epilogue.defines(fused), CS_PASS_VW=vector))
        self.kernel.set_scalar_arg_dtypes([None, np.int32, None] + [np.int32] * 3
                                          + KERNEL_ARG_DTYPES)

    def __call__(self, t, out, args):
        """Enqueue out = the remaining stages of t (t may be out itself)."""
        self.kernel.set_args(t, 0, out, self.plane, self.channels, self.runs,
                             *args.kernel_args())
        return cl.enqueue_nd_range_kernel(self.queue, self.kernel, self.size, None)

# }}}


# {{{ candidates

class Candidate:
    """One way to run an epilogue problem: ``solver`` fusing its first ``fused`` stages, the
    core's pass doing the rest; it answers the solver hooks as find needs them."""

    def __init__(self, solver, fused, name):
        self.solver, self.fused, self.name = solver, fused, name
        self.family, self.directions = solver.family, solver.directions
        self.dynamic = solver.dynamic
        for attribute in OPTIONAL_SOLVER_ATTRIBUTES:
            setattr(self, attribute, solver_attribute(solver, attribute))

    def __repr__(self):
        return f"<epilogue candidate {self.name!r}>"

    def inner(self, problem):
        """The problem the solver is built for: the fused part of the epilogue, or none."""
        return problem.with_epilogue(problem.epilogue.prefix(self.fused) if self.fused else None)

    def rest(self, problem):
        """The stages the core's pass applies."""
        return problem.epilogue.stages[self.fused:]

    def to_scratch(self, problem):
        """Whether the solver writes into scratch: the pass reads the output's prior contents."""
        return any(stage in ("blend", "residual") for stage in self.rest(problem))

    def is_applicable(self, problem):
        return True

    def get_wti(self, problem):
        wti = wti_of(self.solver, self.inner(problem))
        return wti * UNFUSED_WTI if wti > 0 and self.rest(problem) else wti

    def _offset(self, problem, handle):
        inner = workspace_of(self.solver, self.inner(problem), handle)
        return inner, round_up(inner, ALIGN)

    def workspace(self, problem, handle):
        inner, offset = self._offset(problem, handle)
        if not self.to_scratch(problem):
            return inner
        return offset + getattr(problem, problem.direction.output).nbytes

    def build_invoker(self, problem, handle):
        config = config_for(self.solver, problem.with_epilogue(None), handle)
        return self._finished(problem, handle,
                              build_invoker(self.solver, self.inner(problem), handle, config))

    def build_packing(self, problem, handle):
        """The solver's packing of its problem (solver API 2.4), its invoker followed by the
        pass as build_invoker's is: constant weights serve epilogue problems too."""
        config = config_for(self.solver, problem.with_epilogue(None), handle)
        built = build_packing(self.solver, self.inner(problem), handle, config)
        return None if built is None else Packing(
            built.nbytes, built.pack, self._finished(problem, handle, built.invoker))

    def _finished(self, problem, handle, invoker):
        """``invoker`` (buffers, scratch, *more: a packing's takes the packed weights), then the
        core's pass over the stages it leaves; the invoker itself where it leaves none."""
        if not self.rest(problem):
            return invoker
        finish, (inner, offset) = EpiloguePass(handle, problem, self.fused), self._offset(problem, handle)
        to_scratch, out = self.to_scratch(problem), problem.direction.output
        nbytes = getattr(problem, out).nbytes

        def composite(buffers, scratch, *more):
            target = getattr(buffers, out)
            if to_scratch:   # a sub-buffer after the solver's workspace, made for this call: one
                # kept beyond it outlives a scratch its owner releases, and NVIDIA's OpenCL
                # crashes releasing a sub-buffer after its parent (RELIABILITY.md)
                target = scratch.get_sub_region(offset, nbytes) if inner else scratch
            solver_buffers = buffers._replace(**{out: target}).with_epilogue_args(
                buffers.epilogue_args if self.fused else None)
            events = events_of(self.solver.name, invoker(solver_buffers, scratch if inner
                                                         else None, *more))
            return events + [finish(target, getattr(buffers, out), buffers.epilogue_args)]
        return composite


def solver_of(name):
    """The installed solver's name a candidate's name starts with (the part before '/')."""
    return name.split("/")[0]


def candidates(problem, policy=None, device=None):
    """(applicable solvers, {name: why not}) as Registry.candidates gives them (``device``: the
    device's name, for errata) with a 1-D problem's rank candidates (ranks.py), then the bare
    problem's composite layout candidates (layouts.py); for a problem with an epilogue, the
    Candidates of the solvers and rank candidates applicable to its bare convolution, then one
    unfused Candidate per composite (its own name)."""
    bare = problem.with_epilogue(None)
    applicable, skipped = registry().candidates(bare, policy, device)
    applicable += rank_candidates(bare, skipped, policy, device)
    layered = composites(bare, skipped, policy, device)
    if problem.epilogue is None:
        return applicable + layered, skipped
    found = []
    for solver in applicable:
        try:
            fused = fused_stages_of(solver, problem)
        except ContractError as exc:
            log.info("%r fuses none of the epilogue: %s", solver.name, exc.reason)
            fused = 0
        if fused:
            found.append(Candidate(solver, fused, solver.name))
        found.append(Candidate(solver, 0, solver.name + (UNFUSED if fused else "")))
    # a composite fuses none: the bare convolution on copies, then the pass on the final output
    return found + [Candidate(composite, 0, composite.name) for composite in layered], skipped


def resolve(problem, name, policy=None, device=None):
    """The candidate (a solver for a bare problem) called ``name`` (``device``: the device's name,
    for errata); SolverError saying why there is none."""
    applicable, skipped = candidates(problem, policy, device)
    for candidate in applicable:
        if candidate.name == name:
            return candidate
    base = solver_of(name)
    reason = skipped.get(base) or (registry().refusal(base) and "refused at load time")
    if reason is None and base not in registry().solvers:
        registry().get(base)   # raises, listing what is installed
    reason = reason or ("it serves these layouts itself: no composite" if name.endswith(NCHW)
                        else "it serves this rank itself: no 2-D view" if name.endswith(AS_2D)
                        else "it fuses none of this epilogue: no unfused variant")
    raise SolverError(f"solver {name!r} cannot run {problem.key()}: {reason}")

# }}}


# {{{ find: copies of the output, checks of the candidates' outputs

def reads_output(problem, buffers):
    """Whether running ``problem`` reads its output buffer's prior contents: blend, or a
    residual z that is the output's own buffer."""
    structure, args = problem.epilogue, buffers.epilogue_args
    return structure is not None and (structure.blend or (
        structure.residual and args.z == getattr(buffers, problem.direction.output)))


def bench_buffers(handle, problem, buffers):
    """The buffers find runs candidates on: the caller's, or where candidates read the output's
    prior contents, a copy of the output (z following it when it is the output), so that the
    caller's output survives find."""
    if not reads_output(problem, buffers):
        return buffers
    out = problem.direction.output
    original = getattr(buffers, out)
    copy = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, original.size)
    cl.enqueue_copy(handle.queue, copy, original)
    args = buffers.epilogue_args
    args = args._replace(z=copy) if args.z == original else args
    return buffers._replace(**{out: copy}).with_epilogue_args(args)


def host_values(handle, problem, buffers):
    """The epilogue's values as reference.epilogue() takes them, its buffers read back."""
    args, out = buffers.epilogue_args, getattr(problem, problem.direction.output)
    channels = (out.shape[1],)
    host = {"alpha": args.alpha, "beta": args.beta, "z_scale": args.z_scale,
            "activation": args.activation}
    for name, desc in (("scale", type(out)(channels)), ("bias", type(out)(channels)),
                       ("z", out)):   # z in the output's layout
        buffer = getattr(args, name)
        if buffer is not None:
            host[name] = read_tensor(handle, desc, buffer)
    return host


class EpilogueCheck(OutputCheck):
    """OutputCheck for a problem with an epilogue: where the output's prior contents are read,
    they are put back and the candidate run once more before its output is read (repeated
    timing runs compound them); verify compares with the reference's epilogue; NaN or inf from
    finite inputs is a fault unless the activation is power (a negative base makes NaN)."""

    def __init__(self, handle, problem, buffers, verify):
        super().__init__(handle, problem.with_epilogue(None), buffers, False)
        self.problem, out = problem, problem.direction.output
        self.prior = read(handle, problem, buffers, out) if reads_output(problem, buffers) \
            else None
        if verify:
            host = {name: read(handle, problem, buffers, name) for name in "xwy"}
            self.index = sample_index(problem)
            with np.errstate(all="ignore"):
                self.expected = reference.compute_at(problem, *host.values(), self.index,
                                                     **host_values(handle, problem, buffers))

    def _inputs_finite(self):
        if self.problem.epilogue.activation == "power":   # NaN of negative bases is right
            return False
        if self._finite_inputs is None:
            values = host_values(self.handle, self.problem, self.buffers)
            arrays = [values.get(name) for name in ("scale", "bias", "z")]
            prior = self.prior if self.problem.epilogue.blend else None
            self._finite_inputs = super()._inputs_finite() and all(
                np.isfinite(a).all() for a in arrays + [prior] if a is not None)
        return self._finite_inputs

    def fault(self, tolerance, rerun=None):
        """OutputCheck.fault, after the candidate ran again (``rerun()``) on the kept prior
        output where it reads it."""
        if self.prior is not None and rerun is not None:
            cl.enqueue_copy(self.handle.queue, getattr(self.buffers, self.problem.direction.output),
                            self.prior)
            cl.wait_for_events(rerun())
        return super().fault(tolerance)


def output_check(handle, problem, buffers, verify):
    """find's OutputCheck, or an EpilogueCheck for a problem with an epilogue."""
    if problem.epilogue is None:
        return OutputCheck(handle, problem, buffers, verify)
    return EpilogueCheck(handle, problem, buffers, verify)

# }}}
