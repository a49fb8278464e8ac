"""Calling a solver's hooks: each result checked against the contract, each failure a reason."""
import functools
import inspect
import math
from numbers import Integral

import pyopencl as cl

from ..errors import ContractError, ConvsolveError
from ..tuning import ConfigSpace


@functools.cache
def _arguments(cls, hook):
    return tuple(inspect.signature(getattr(cls, hook)).parameters)[1:]   # after self


def call_hook(solver, hook, **arguments):
    """``solver.<hook>`` called with the arguments its implementation declares: as in pluggy, an
    implementation may take fewer arguments than the spec (``build_invoker`` without ``config``,
    ``config_space`` without ``handle``)."""
    accepted = _arguments(type(solver), hook)
    return getattr(solver, hook)(**{name: arguments[name] for name in accepted})


def workspace_of(solver, problem, handle):
    """The solver's workspace in bytes on ``handle``'s device; ContractError when the hook raises
    or answers other than an int >= 0."""
    try:
        value = call_hook(solver, "workspace", problem=problem, handle=handle)
    except Exception as exc:
        raise ContractError(solver.name, f"workspace() raised {exc!r}") from exc
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 0:
        raise ContractError(solver.name, f"workspace() returned {value!r}, not bytes >= 0")
    return int(value)


def wti_of(solver, problem):
    """The solver's WTI, in (0, 1] or negative (unknown); ContractError when the hook raises or
    answers anything else (NaN, 0, above 1, not a number)."""
    try:
        value = float(solver.get_wti(problem))
    except Exception as exc:
        raise ContractError(solver.name, f"get_wti() raised {exc!r}") from exc
    if not math.isfinite(value) or value == 0 or value > 1:
        raise ContractError(solver.name,
                            f"get_wti() returned {value!r}, not in (0, 1] or negative")
    return value


def build_invoker(solver, problem, handle, config=None):
    """The solver's invoker (a tunable solver's built with ``config``, None: its default);
    ContractError when build_invoker raises anything but a convsolve error (a BuildError passes
    through) or returns something not callable."""
    if config is None and is_tunable(solver):
        config = default_config_of(solver, problem, handle)
    try:
        invoker = call_hook(solver, "build_invoker", problem=problem, handle=handle,
                            config=config)
    except ConvsolveError:
        raise
    except Exception as exc:
        raise ContractError(solver.name, f"build_invoker() raised {exc!r}") from exc
    if not callable(invoker):
        raise ContractError(solver.name, f"build_invoker() returned {invoker!r}, not an invoker")
    return invoker


def events_of(solver_name, events):
    """An invoker's result checked to be a non-empty list of pyopencl events."""
    if not isinstance(events, (list, tuple)) or not events or not all(
            isinstance(event, cl.Event) for event in events):
        raise ContractError(solver_name, f"its invoker returned {events!r}, not a non-empty "
                                         "list of pyopencl events")
    return list(events)


def fused_stages_of(solver, problem):
    """How many leading stages of ``problem.epilogue`` the solver fuses: 0 without the
    ``fused_stages`` hook (or 2.2's ``fused_epilogue``); ContractError when the hook raises or
    answers other than an int in [0, len(problem.epilogue.stages)]."""
    hook = fusing_hook(solver)
    if hook is None:
        return 0
    try:
        value = getattr(solver, hook)(problem)
    except Exception as exc:
        raise ContractError(solver.name, f"{hook}() raised {exc!r}") from exc
    most = len(problem.epilogue.stages)
    if isinstance(value, bool) or not isinstance(value, Integral) or not 0 <= value <= most:
        raise ContractError(solver.name, f"{hook}() returned {value!r}, not a count of "
                                         f"stages in [0, {most}]")
    return int(value)


def fusing_hook(solver):
    """The name of the hook by which ``solver`` fuses epilogue stages ('fused_stages', or 2.2's
    'fused_epilogue'), or None when it fuses none."""
    return next((hook for hook in ("fused_stages", "fused_epilogue")
                 if callable(getattr(solver, hook, None))), None)


# {{{ tunable solvers

def is_tunable(solver):
    """Whether the solver implements the tunable hooks (discovery checks they come together)."""
    return callable(getattr(solver, "config_space", None))


def space_of(solver, problem, handle):
    """The solver's ConfigSpace for ``problem`` on ``handle``; ContractError when the hook raises
    or answers something else."""
    try:
        space = call_hook(solver, "config_space", problem=problem, handle=handle)
    except Exception as exc:
        raise ContractError(solver.name, f"config_space() raised {exc!r}") from exc
    if not isinstance(space, ConfigSpace):
        raise ContractError(solver.name, f"config_space() returned {space!r}, not a ConfigSpace")
    return space


def config_refusal(solver, problem, handle, config, space=None):
    """Why ``config`` cannot run ``problem`` on ``handle`` (outside the space, a false
    constraint, the solver's check_config), or None; ContractError when a hook misbehaves."""
    reason = (space or space_of(solver, problem, handle)).refusal(config)
    if reason or not callable(getattr(solver, "check_config", None)):
        return reason
    try:
        reasons = call_hook(solver, "check_config", problem=problem, handle=handle,
                            config=config)
    except Exception as exc:
        raise ContractError(solver.name, f"check_config() raised {exc!r}") from exc
    if not isinstance(reasons, (list, tuple)) or not all(isinstance(r, str) for r in reasons):
        raise ContractError(solver.name, f"check_config() returned {reasons!r}, not a list of "
                                         "reasons")
    return "; ".join(reasons) or None


def default_config_of(solver, problem, handle):
    """The solver's default config for ``problem`` on ``handle``, checked to be valid;
    ContractError otherwise."""
    try:
        config = call_hook(solver, "default_config", problem=problem, handle=handle)
    except Exception as exc:
        raise ContractError(solver.name, f"default_config() raised {exc!r}") from exc
    reason = config_refusal(solver, problem, handle, config)
    if reason:
        raise ContractError(solver.name, f"default_config() returned {config!r}: {reason}")
    return dict(config)

# }}}
