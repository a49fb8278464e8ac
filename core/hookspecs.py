"""The solver contract: every hook, attribute and type a plugin or a solver touches.

Two tiers.  A plugin module implements the 1:N hook ``convsolve_solvers()`` and returns solver
objects.  Each solver object implements the per-solver hooks as methods decorated with
``@hookimpl``; the core registers every solver with pluggy, which checks each method against
these signatures (a misspelt hook or argument fails at load time), and then calls one solver's
methods directly.  Argument names are part of the contract: ``problem``, ``handle``, ``config``;
as in pluggy, an implementation may declare fewer arguments than its spec (``build_invoker``
without ``config`` for a solver that is not tunable), and is called with those it declares.

Words, one per idea: a solver's *workspace* is the number of bytes of device memory it needs
besides the tensors (the ``workspace`` hook, ``Solution.workspace``); the buffer that provides
them is the *scratch* buffer (``find(..., scratch=)``, ``run(..., scratch=)``, the invoker's
``scratch``).  A solver's *family* (``gemm``, ``direct``, ...) groups solvers for switches and
for ``run(solver=family)``.

A plugin module declares the solver API versions it supports as a PEP 440 specifier,
``CONVSOLVE_SOLVER_API = ">=2.1,<3"``; a plugin that does not admit ``SOLVER_API_VERSION`` is
refused at load time.  docs/hooks.md is generated from this module (``convsolve hooks``,
``python -m convsolve.cli.docgen docs``).
"""
from __future__ import annotations

import warnings
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, NamedTuple, Protocol

import pluggy

from .problem import CHANNELS_FIRST

if TYPE_CHECKING:
    import pyopencl as cl

    from .device.handle import Handle
    from .epilogue import EpilogueArgs
    from .problem import Direction, Problem
    from .tuning import ConfigSpace

PROJECT = "convsolve"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

#: Version of this contract.  Added hooks or opt-in arguments raise the minor number; a renamed
#: or removed hook or attribute raises the major one (2.0: ``algorithm`` became ``family`` and
#: the invoker's buffer is called ``scratch`` everywhere; 2.1: tunable solvers' hooks; 2.2:
#: epilogues, ``fused_epilogue`` and ``Buffers.epilogue``; 2.3: ``nonfinite = "spread"`` bounded
#: by the planes a non-finite input reaches, and one word per thing: ``fused_stages`` and
#: ``Buffers.epilogue_args``, 2.2's names still served with a DeprecationWarning; 2.4: constant
#: weights, ``build_packing`` and ``Packing``; 2.5: problems of spatial rank 1 and 3 and
#: channels-last layouts, served to solvers that declare ``spatial_dims`` and ``layouts``; 2.6:
#: ``workspace`` may take the ``handle``, so that a solver sizes its scratch for the device).
SOLVER_API_VERSION = "2.6"

#: Per-solver hooks a solver must implement; the core refuses a solver that lacks one.
REQUIRED_SOLVER_HOOKS = ("is_applicable", "get_wti", "workspace", "build_invoker")
#: Hooks a tunable solver implements besides those (both of the first two, or none);
#: ``check_config`` is optional.
TUNING_HOOKS = ("config_space", "default_config", "check_config")
#: The optional hook of a solver that computes (part of) an output epilogue itself, and its
#: deprecated 2.2 name.
EPILOGUE_HOOKS = ("fused_stages", "fused_epilogue")
#: The optional hook of a solver that can run from weights it packed once (constant weights).
PACKING_HOOKS = ("build_packing",)


# {{{ types a solver touches

class Buffers(NamedTuple):
    """The device buffers of one call, in forward-sense roles for every direction.

    Forward reads ``x`` and ``w`` and writes ``y``; backward-data reads ``y`` (dy) and ``w`` and
    writes ``x`` (dx); backward-weights reads ``x`` and ``y`` (dy) and writes ``w`` (dw), as
    MIOpen's ConvTensors do.  ``x`` and ``y`` are None for a zero batch.

    ``buffers.epilogue_args`` holds the run-time values of the problem's epilogue (a
    ``convsolve.EpilogueArgs``: alpha, beta, z_scale, the activation's parameters, the ``scale``,
    ``bias`` and ``z`` buffers; ``args.kernel_args()`` gives them as ``CS_EPILOGUE_PARAMS`` of
    ``convsolve_epilogue.h`` take them) when the problem a solver was built for has one, that is
    when its ``fused_stages`` said it computes that much; else None.  Iterating Buffers gives
    x, w and y only.
    """

    x: cl.Buffer | None
    w: cl.Buffer
    y: cl.Buffer | None

    @property
    def epilogue_args(self) -> EpilogueArgs | None:
        """The epilogue's run-time values, or None."""
        return getattr(self, "_args", None)

    @property
    def epilogue(self) -> EpilogueArgs | None:
        """2.2's name of ``epilogue_args`` (deprecated: "epilogue" is the problem's structure)."""
        warnings.warn("Buffers.epilogue is Buffers.epilogue_args since solver API 2.3",
                      DeprecationWarning, stacklevel=2)
        return self.epilogue_args

    def with_epilogue_args(self, args):
        """These buffers carrying the epilogue's run-time values ``args`` (None: plain
        Buffers)."""
        if args is None:
            return Buffers(*self)
        carrier = _EpilogueBuffers(*self)
        carrier._args = args
        return carrier

    def with_epilogue(self, args):
        """2.2's name of ``with_epilogue_args`` (deprecated)."""
        warnings.warn("Buffers.with_epilogue is Buffers.with_epilogue_args since solver API 2.3",
                      DeprecationWarning, stacklevel=2)
        return self.with_epilogue_args(args)


class _EpilogueBuffers(Buffers):
    """Buffers with an epilogue's values (an attribute: the tuple stays x, w, y)."""

    def _replace(self, **changes):
        return Buffers._replace(self, **changes).with_epilogue_args(self._args)


class Invoker(Protocol):
    """What ``build_invoker`` returns: runs the built solver on one set of buffers."""

    def __call__(self, buffers: Buffers, scratch: cl.Buffer | None) -> list[cl.Event]:
        """Enqueue the solver's kernels on ``handle.queue`` without waiting.

        ``scratch`` holds at least ``workspace(problem)`` bytes, or is None when that is 0.
        The invoker must overwrite its output completely, whatever the buffer held, and touch
        nothing else but ``scratch``.  It returns the events in launch order, one at least; the
        core times it from the first event's start to the last event's end.  ``handle.queue`` is
        the queue of the handle ``build_invoker`` was given, which may capture it: the core builds
        one invoker per queue (a handle's plain queue for runs, its timing twin's profiling queue
        for find and tuning).

        Non-finite inputs give non-finite outputs exactly where ``convsolve.reference`` has
        them: the convolution is that of the zero-padded input, so padded elements take part in
        the products (0 * inf = NaN), and a kernel that skips padded taps must still produce
        what multiplying their zeros would.
        """


class Attribute(NamedTuple):
    """One plain attribute of a solver: name, type, default (REQUIRED if none), meaning."""

    name: str
    type: str
    default: object
    meaning: str


REQUIRED = object()

#: Every plain attribute a solver object carries; the core checks them at registration.
SOLVER_ATTRIBUTES = (
    Attribute("name", "str", REQUIRED,
              "stable id ``family.Name``, stored in find-dbs; never reuse or rename one"),
    Attribute("family", "str", REQUIRED,
              "its family (``gemm``, ``direct``, ``winograd``, ``fft``, ``implicit_gemm`` or "
              "your own); ``CONVSOLVE_DEBUG_CONV_<FAMILY>=0`` turns it off"),
    Attribute("directions", "collection of Direction", REQUIRED,
              "the directions it may serve"),
    Attribute("dynamic", "bool", REQUIRED,
              "True when one build serves every problem (sizes are kernel arguments), so the "
              "default find mode may benchmark it on a find-db miss"),
    Attribute("deterministic", "bool", True,
              "two runs on the same inputs give bitwise-equal outputs"),
    Attribute("tolerance", "float", 1e-5,
              "the relative RMS error against the float64 reference its numerics allow (larger "
              "for Winograd or FFT); verification and ``check_solver`` hold it to this"),
    Attribute("reduced_precision", "bool", False,
              "computes with less than float32 precision (e.g. TF32); off unless "
              "``CONVSOLVE_ALLOW_REDUCED_PRECISION=1``"),
    Attribute("spatial_dims", "tuple of int", (2,),
              "the spatial ranks (1, 2, 3) of the problems it serves; the core gives it no "
              "other (``problem.spatial_dims``; solver API 2.5)"),
    Attribute("layouts", "tuple of str", CHANNELS_FIRST,
              "the tensor layouts it serves (``NCHW``, ``NHWC``, ...: ``convsolve."
              "ALL_LAYOUTS``); the core gives it only problems whose x, w and y each have one "
              "of them (solver API 2.5)"),
    Attribute("nonfinite", "str", "exact",
              "``exact``: non-finite inputs give NaN and +-inf exactly where the reference has "
              "them; ``spread`` (transform algorithms: Winograd, FFT): every output the reference "
              "makes non-finite is non-finite, others may be too, but only in the output planes "
              "that share a product with a non-finite input (forward: y[n, k of c's group] for "
              "x[n, c], y[:, k] for w[k]: ``convsolve.testing.nonfinite_reach``), and the finite "
              "rest is within tolerance"),
)
#: The values the ``nonfinite`` attribute may take.
NONFINITE_MODES = ("exact", "spread")

#: Optional solver attributes and their defaults when absent.
OPTIONAL_SOLVER_ATTRIBUTES = {a.name: a.default for a in SOLVER_ATTRIBUTES
                              if a.default is not REQUIRED}


def solver_attribute(solver, attribute):
    """An optional solver attribute, or its default from OPTIONAL_SOLVER_ATTRIBUTES."""
    return getattr(solver, attribute, OPTIONAL_SOLVER_ATTRIBUTES[attribute])


class Solver(Protocol):
    """A solver object as the core sees it (for type checkers; pluggy checks the hooks)."""

    name: str
    family: str
    directions: Collection[Direction]
    dynamic: bool

    def is_applicable(self, problem: Problem) -> bool: ...
    def get_wti(self, problem: Problem) -> float: ...
    def workspace(self, problem: Problem) -> int: ...
    def build_invoker(self, problem: Problem, handle: Handle) -> Invoker: ...


#: A tunable solver's performance config: parameter name -> value (ints, floats, identifiers).
Config = dict


class Packing(NamedTuple):
    """What ``build_packing`` returns: a solver's weights transform split from the rest.

    ``nbytes`` is the size of the packed weights (> 0); ``pack(w, packed)`` enqueues what fills
    the buffer ``packed`` (of ``nbytes`` bytes) from the weights buffer ``w`` and returns its
    events; ``invoker(buffers, scratch, packed)`` is the solver's invoker reading the packed
    weights instead of ``buffers.w`` (which it must not read), with the same workspace and
    the same output contract as ``build_invoker``'s.
    """

    nbytes: int
    pack: Callable[[cl.Buffer, cl.Buffer], list[cl.Event]]
    invoker: Callable[[Buffers, cl.Buffer | None, cl.Buffer], list[cl.Event]]

# }}}


# {{{ plugin hooks

@hookspec
def convsolve_solvers() -> list[Solver]:
    """Return the plugin's solver objects.

    Called once per process, when the core first loads plugins (discovery); it may import
    modules but must not touch an OpenCL device.

    :returns: a list of solver objects (see the solver attributes).  Raising makes the core log
      the plugin as broken and skip it (fatal under ``CONVSOLVE_STRICT_PLUGINS=1``); other
      plugins are unaffected.

    Example::

        @hookimpl
        def convsolve_solvers():
            return [Pointwise(), Im2Col()]

    .. versionadded:: 1.0
    """

# }}}


# {{{ per-solver hooks

@hookspec
def is_applicable(problem: Problem) -> bool:
    """Decide whether the solver computes ``problem`` correctly.

    Called for every enabled solver whose ``directions`` contain ``problem.direction``, by find,
    immediate mode, ``run`` and the driver, often and before anything is built: it must be cheap,
    pure, and must not touch a device.

    :param problem: the :class:`convsolve.Problem` (already validated).
    :returns: True when the solver can run it.  Raising counts as not applicable and is logged.

    Example::

        @hookimpl
        def is_applicable(self, problem):   # a 1x1 kernel that reads no stride, pad or dilation
            return (problem.dtype == "float32" and problem.groups == 1
                    and problem.fil_h == problem.fil_w == 1
                    and problem.conv.strides == (1, 1) and problem.conv.dilations == (1, 1)
                    and problem.conv.pads == ((0, 0), (0, 0)))

    .. versionadded:: 1.0
    """


@hookspec
def get_wti(problem: Problem) -> float:
    """Estimate how well the solver suits ``problem``, without running anything.

    WTI ("wall time index", as in MIOpen) is the estimated fraction of the device's peak the
    solver reaches.  Immediate mode ranks solutions by it on a find-db miss (estimated time =
    10 / WTI ms, as MIOpen does) and find times candidates in descending WTI order.  Called only
    for applicable problems.

    :param problem: the :class:`convsolve.Problem`.
    :returns: a float in (0, 1], or a negative number when unknown (the solver is then left out
      of the fallback ranking, but still benchmarked by find).

    .. versionadded:: 1.0
    """


@hookspec
def workspace(problem: Problem, handle: Handle) -> int:
    """Return the solver's workspace for ``problem`` on ``handle``'s device: bytes of device
    memory besides the tensors.

    Called for applicable problems before building; find skips the solver when a smaller
    scratch buffer is available, and ``run`` refuses one.  The figure must be exact: the invoker
    uses at most this many bytes of ``scratch`` and runs correctly with exactly this many.  It
    may depend on the device (as MIOpen's takes the execution context: e.g. a batch processed in
    chunks sized for a CPU's caches, whole on a GPU), never on the config.

    :param problem: the :class:`convsolve.Problem`.
    :param handle: the :class:`convsolve.Handle` it will run on (solver API 2.6; an
      implementation may leave it out).
    :returns: an int >= 0 (bytes).

    Example::

        @hookimpl
        def workspace(self, problem):   # one image's columns: C*R*S rows of OH*OW floats
            return problem.c * problem.fil_h * problem.fil_w * problem.out_h * problem.out_w * 4

    .. versionadded:: 1.0
    .. versionchanged:: 2.6 the ``handle`` argument.
    """


@hookspec
def build_invoker(problem: Problem, handle: Handle, config: Config) -> Invoker:
    """Build (compile) what the solver needs for ``problem`` and return its invoker.

    Called by find for every candidate (in parallel threads, so it must not share mutable state
    between calls), by ``compile_solution`` and by ``run`` on a miss of the handle's invoker
    cache; the core keeps the invoker, so it is built once per (solver, problem, config,
    handle).  It compiles through ``handle.build(file, kernel, defines)``, which uses the
    on-disk kernel cache with ``convsolve.h`` on the include path and returns a new kernel object
    per call.  Kernels are ``.cl`` files in the plugin's ``kernels/`` folder; tunables go in as
    ``-D`` defines (ints, floats and identifiers only), each with an ``#ifndef`` default in the
    file.  Dynamic kernels take the sizes as arguments instead: ``CS_CONV_PARAMS`` in
    ``convsolve.h`` declares them in the order ``problem.kernel_args()`` passes them.

    :param problem: the :class:`convsolve.Problem`.
    :param handle: the :class:`convsolve.Handle` (``device``, ``context``, ``queue``,
      ``build()``).
    :param config: tunable solvers only (leave the argument out otherwise): the config to build,
      one that ``config_space`` holds and ``check_config`` accepts: the perf-db's tuned one, else
      ``default_config``'s, or one a search is timing.
    :returns: an :class:`Invoker`, ``invoker(buffers, scratch) -> list[pyopencl.Event]``.
      Raising (e.g. :class:`convsolve.BuildError`) makes find skip the solver with the reason.

    Example::

        KERNELS = resources.files(__package__) / "kernels"

        @hookimpl
        def build_invoker(self, problem, handle):   # not tunable: no config argument
            im2col = handle.build(KERNELS / "im2col.cl", "im2col")   # dynamic: sizes as arguments
            gemm = handle.build(KERNELS / "im2col.cl", "columns_gemm")
            columns = (problem.c * problem.fil_h * problem.fil_w * problem.out_h * problem.out_w,)
            outputs = (problem.k * problem.out_h * problem.out_w,)
            sizes = problem.kernel_args()

            def invoker(buffers, scratch):   # the queue runs them in order, one image at a time
                events = []
                for image in range(problem.n):
                    im2col.set_args(buffers.x, scratch, np.int32(image), *sizes)
                    gemm.set_args(scratch, buffers.w, buffers.y, np.int32(image), *sizes)
                    events += [cl.enqueue_nd_range_kernel(handle.queue, im2col, columns, None),
                               cl.enqueue_nd_range_kernel(handle.queue, gemm, outputs, None)]
                return events
            return invoker

    .. versionadded:: 1.0
    .. versionchanged:: 2.1 the ``config`` argument, for tunable solvers.
    """

# }}}


# {{{ epilogues

@hookspec
def fused_stages(problem: Problem) -> int:
    """Say how many leading stages of ``problem.epilogue`` the solver computes itself (optional).

    An epilogue (``convsolve.Epilogue``, docs/epilogues.md) is what the output carries besides
    the convolution, forward ``y = act(alpha * conv * scale[k] + bias[k] + z_scale * z) + beta *
    y_prior``, backward ``alpha * conv + beta * prior``; its present stages, in order, are
    ``problem.epilogue.stages`` (``alpha`` first, then ``scale``, ``bias``, ``residual``,
    ``activation``, ``blend``).  Called by find, ``run`` and immediate mode for a problem with
    an epilogue that the solver ``is_applicable`` to (is_applicable sees the bare problem: every
    solver serves every epilogue).  For an answer ``n > 0`` the core builds the solver (every
    hook then gets it) for ``problem.with_epilogue(problem.epilogue.prefix(n))`` and runs it
    with ``buffers.epilogue_args`` holding the values; it applies the remaining stages itself in one
    pass of ``convsolve_epilogue.h``, the header the solver's kernels include too (``#include
    "convsolve_epilogue.h"``, ``CS_EPILOGUE_PARAMS``, ``CS_EPILOGUE``, or for one value at a
    time ``CS_EPI_ARGS``, ``CS_EPI_VALUES``, ``CS_EPI_STORE``; ``problem.epilogue_defines()``
    gives its ``CS_EPI_*`` defines), so the fused and the unfused arithmetic are the same code.
    Find also times the solver unfused (named ``<name>/unfused``: the bare convolution, then the
    core's pass), and the faster wins.  Without this hook, or for 0, the solver only ever sees
    bare problems.  A fused kernel must read ``z[i]`` and the prior ``y[i]`` before writing
    ``y[i]``, in the same work-item: z may be the output's own buffer, and the prior output is
    read only where ``beta != 0`` (a NaN-filled output with ``beta == 0`` stays harmless).  A
    coefficient of 0 means its operand is never read (``CS_EPILOGUE`` does that).  Problems of
    every spatial rank and layout the solver serves carry epilogues (``scale`` and ``bias`` per
    output channel ``k``, z in y's layout): answer 0 for those whose stores do not know each
    element's channel (a GEMM whose rows are pixels, say), and the core applies it;
    ``check_solver`` checks the answer on every rank and layout the solver claims.

    :param problem: the :class:`convsolve.Problem`, with its full epilogue.
    :returns: an int in ``[0, len(problem.epilogue.stages)]``.  Raising or answering anything
      else counts as 0 and is logged.

    Example::

        @hookimpl
        def fused_stages(self, problem):   # all of it: one work-item stores each y element once
            return len(problem.epilogue.stages)

    .. versionadded:: 2.3
       (2.2 named it ``fused_epilogue``, still served: see below)
    """


@hookspec(warn_on_impl=DeprecationWarning(
    "the hook fused_epilogue is named fused_stages since solver API 2.3 (it counts the epilogue's "
    "stages a solver fuses); rename the method and declare CONVSOLVE_SOLVER_API >=2.3"))
def fused_epilogue(problem: Problem) -> int:
    """2.2's name of :func:`fused_stages`, served with a DeprecationWarning at registration.

    The answer means what ``fused_stages``'s does; a solver with both is asked ``fused_stages``.

    .. versionadded:: 2.2
    """

# }}}


# {{{ tunable solvers' hooks

@hookspec
def config_space(problem: Problem, handle: Handle) -> ConfigSpace:
    """Describe every performance config the solver accepts for ``problem``, as data.

    A solver that implements this hook is *tunable*: it must implement ``default_config`` too,
    and its ``build_invoker`` takes ``config``.  Leave ``handle`` out unless the space differs
    between devices (a local-memory variant's parameters on GPUs, say).  ``find(..., exhaustive=True)`` and
    ``convsolve tune`` search the space (build, time and verify each config against the
    default's output) and keep the fastest in the perf-db; find and run then build that config.
    A config changes speed only: the output stays within the solver's ``tolerance`` and the
    ``workspace`` never depends on it (as in MIOpen).

    :param problem: the :class:`convsolve.Problem` (one the solver accepts).
    :param handle: the :class:`convsolve.Handle` (optional argument).
    :returns: a :class:`convsolve.ConfigSpace`: parameters with their candidate values, sorted,
      and constraints as expressions over their names.

    Example::

        @hookimpl
        def config_space(self, problem):
            return ConfigSpace({"TILE_K": (1, 2, 4, 8), "TILE_P": (1, 2, 4, 8)},
                               constraints=["TILE_K * TILE_P <= 16"])   # accumulators per work-item

    .. versionadded:: 2.1
    """


@hookspec
def default_config(problem: Problem, handle: Handle) -> Config:
    """Return the config to build for ``problem`` on ``handle``'s device when none is tuned.

    Pick it per device class with ``convsolve.tuning.pick(table, handle.device)``, which falls
    back from the exact device to its architecture, ISA class (``cpu/vector16`` is AVX-512,
    ``cpu/vector8`` AVX2), vendor and type, so that an untuned device still gets tiles of its
    own vector width.

    :param problem: the :class:`convsolve.Problem`.
    :param handle: the :class:`convsolve.Handle`.
    :returns: a config that ``config_space(problem)`` holds and ``check_config`` accepts.

    Example::

        DEFAULTS = {"cpu/vector16": {"TILE_K": 4, "TILE_P": 4}, "cpu": {"TILE_K": 4, "TILE_P": 2},
                    "*": {"TILE_K": 2, "TILE_P": 1}}

        @hookimpl
        def default_config(self, problem, handle):
            return dict(tuning.pick(DEFAULTS, handle.device))

    .. versionadded:: 2.1
    """


@hookspec
def check_config(problem: Problem, handle: Handle, config: Config) -> list[str]:
    """Say why ``config`` cannot run ``problem`` on ``handle``'s device (optional hook).

    For what the space's constraints cannot know: the device's local memory, work-group size,
    or sizes the problem must reach.  The core checks the space and the constraints first.

    :returns: the reasons, one string each; empty when the config can run.

    .. versionadded:: 2.1
    """

# }}}


# {{{ constant weights

@hookspec
def build_packing(problem: Problem, handle: Handle, config: Config) -> Packing | None:
    """Split the solver's per-call weights transform (a filter transform, a packing or reorder)
    from the rest of its work, for callers whose weights stay constant (optional).

    A caller that says ``constant_weights=True`` (``convsolve.run``, ``Plan``, ``find``, the
    numpy API's forward-sense functions) promises the contents of its weights buffer do not
    change until it passes another ``weights_version``.  For such calls the core builds this
    (once per solver, problem, config and handle, as ``build_invoker``), and keeps the packed
    weights in the handle's weights cache (device buffers keyed by the caller's weights
    buffer, its version, the solver, config and problem; bounded by
    ``CONVSOLVE_WEIGHTS_CACHE_BYTES``, least recently used first out, freed with the handle):
    it runs ``pack`` when the cache has no packed weights of that buffer and version, then
    ``invoker`` from them.  find, told the weights are constant, runs ``pack`` once before
    timing ``invoker``, and ranks under a find-db key of its own.  Forward and backward-data
    only (backward-weights writes the weights); a solver without this hook, or answering
    None, is run as always.  Called from find's build threads: share no mutable state.

    :param problem: the :class:`convsolve.Problem` (forward or backward-data, one the solver
      ``is_applicable`` to, with the epilogue it fuses).
    :param handle: the :class:`convsolve.Handle`.
    :param config: tunable solvers only (as ``build_invoker``'s): the config ``build_invoker``
      gets for the same call.
    :returns: a :class:`convsolve.Packing` (``nbytes``, ``pack``, ``invoker``), or None when
      the solver has nothing to pack for ``problem``.  Raising, or answering anything else, is
      logged and the solver runs without packing.

    Example::

        @hookimpl
        def build_packing(self, problem, handle, config):   # w transposed once: C x K
            transpose = handle.build(KERNELS / "pointwise.cl", "transpose_w",
                                     defines=problem.defines())
            run = self.build_invoker(problem, handle, {**config, "W_CK": 1})

            def pack(w, packed):
                transpose.set_args(w, packed)
                return [cl.enqueue_nd_range_kernel(handle.queue, transpose, (problem.k * problem.c,),
                                                   None)]
            return Packing(problem.w.nbytes, pack,
                           lambda buffers, scratch, packed: run(buffers._replace(w=packed), scratch))

    .. versionadded:: 2.4
    """

# }}}
