"""The solver contract: every hook a plugin or a solver implements, each docstring the spec.

Two tiers.  A plugin module implements the 1:N hook ``convsolve_solvers()`` and returns solver
objects.  Each solver object implements the per-solver hooks below as methods decorated with
``@hookimpl``; the core registers every solver with pluggy (which checks each method against these
signatures, so a misspelt hook or argument fails at load time) and then calls one solver's methods
directly.  Argument names are part of the contract: ``problem``, ``handle``.

Besides the hooks, a solver object carries plain attributes (checked at registration):

- ``name`` (str): stable id ``family.Name``, stored in find-dbs; never reuse or rename one.
- ``family`` (str): its family, e.g. ``"direct"``; ``CONVSOLVE_DEBUG_CONV_<FAMILY>=0`` turns it off.
- ``directions`` (collection of :class:`convsolve.Direction`): the directions it may serve.
- ``dynamic`` (bool): True when it needs no per-problem compile (one build serves every problem),
  so the default find mode may benchmark it on a find-db miss.

Optional attributes, with their defaults when absent (``OPTIONAL_SOLVER_ATTRIBUTES``):

- ``deterministic`` (bool, True): two runs on the same inputs give bitwise-equal outputs.
- ``tolerance`` (float, 1e-5): the relative RMS error against the float64 reference its numerics
  allow (e.g. larger for Winograd or FFT); verification and ``check_solver`` hold it to this.
- ``reduced_precision`` (bool, False): computes with less than float32 precision (e.g. TF32);
  such a solver is off unless ``CONVSOLVE_ALLOW_REDUCED_PRECISION=1``.

A plugin module declares the solver API versions it supports as a PEP 440 specifier,
``CONVSOLVE_SOLVER_API = ">=2.0,<3"``; a plugin that does not admit ``SOLVER_API_VERSION`` is
refused at load time.

An *invoker* is what ``build_invoker`` returns: ``invoker(buffers, scratch) -> list[pyopencl.Event]``.
``buffers`` has the device buffers ``x``, ``w``, ``y`` in their forward-sense roles (backward-data
writes ``x``, backward-weights writes ``w``); ``scratch`` is a buffer of at least ``workspace(problem)``
bytes, or None when that is 0.  It enqueues its kernels on ``handle.queue`` without waiting and
returns their events in launch order; the core times it from the first event's start to the last
event's end.  It must overwrite its output completely, whatever the buffer held before.
"""
import pluggy

PROJECT = "convsolve"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

#: Version of this contract.  Added hooks or opt-in arguments raise the minor number.
SOLVER_API_VERSION = "2.0"

#: Optional solver attributes and their defaults (see the module docstring).
OPTIONAL_SOLVER_ATTRIBUTES = {"deterministic": True, "tolerance": 1e-5, "reduced_precision": False}

#: Per-solver hooks a solver must implement; the core refuses a solver that lacks one.
REQUIRED_SOLVER_HOOKS = ("is_applicable", "get_wti", "workspace", "build_invoker")


# {{{ plugin hooks

@hookspec
def convsolve_solvers():
    """Return the plugin's solver objects.

    Called once per process, when the core first loads plugins (discovery); it may import
    modules but must not touch an OpenCL device.

    :returns: a list of solver objects (see the module docstring for their attributes).
      Raising makes the core log the plugin as broken and skip it (fatal under
      ``CONVSOLVE_STRICT_PLUGINS=1``); other plugins are unaffected.

    .. versionadded:: 1.0
    """

# }}}


# {{{ per-solver hooks

@hookspec
def is_applicable(problem):
    """Decide whether the solver computes ``problem`` correctly.

    Called for every enabled solver whose ``directions`` contain ``problem.direction``, by find,
    immediate mode and the driver, often and before anything is built: it must be cheap, pure, and
    must not touch a device.

    :param problem: the :class:`convsolve.Problem` (already validated).
    :returns: True when the solver can run it.  Raising counts as not applicable and is logged.

    .. versionadded:: 1.0
    """


@hookspec
def get_wti(problem):
    """Estimate how well the solver suits ``problem``, without running anything.

    WTI ("wall time index", as in MIOpen) is the estimated fraction of the device's peak the solver
    reaches.  Immediate mode ranks solutions by it on a find-db miss (estimated time =
    10 / WTI ms, as MIOpen does) and find times candidates in descending WTI order.  Called only
    for applicable problems.

    :param problem: the :class:`convsolve.Problem`.
    :returns: a float in (0, 1], or a negative number when unknown (the solver is then left out
      of the fallback ranking, but still benchmarked by find).

    .. versionadded:: 1.0
    """


@hookspec
def workspace(problem):
    """Return the bytes of scratch device memory the solver needs for ``problem``.

    Called for applicable problems before building; find skips the solver when less is
    available, and ``run`` refuses a smaller scratch buffer.  The figure must be exact: the
    invoker uses at most this many bytes and runs correctly with exactly this many.

    :param problem: the :class:`convsolve.Problem`.
    :returns: an int >= 0 (bytes).

    .. versionadded:: 1.0
    """


@hookspec
def build_invoker(problem, handle):
    """Build (compile) what the solver needs for ``problem`` and return its invoker.

    Called by find for every candidate (in parallel threads, so it must not share mutable state
    between calls), by ``compile_solution`` and by ``run`` on a handle-cache miss.  It compiles
    through ``handle.build(file, kernel, defines)``, which uses the on-disk kernel cache; the core
    keeps the returned invoker in the handle, so it is built once per (solver, problem, handle).

    :param problem: the :class:`convsolve.Problem`.
    :param handle: the :class:`convsolve.Handle` (device, context, queue, build()).
    :returns: an invoker ``invoker(buffers, scratch) -> list[pyopencl.Event]`` (module docstring).
      Raising (e.g. :class:`convsolve.BuildError`) makes find skip the solver with the reason.

    .. versionadded:: 1.0
    """

# }}}
