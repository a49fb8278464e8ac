"""Calling a solver's hooks: each result checked against the contract, each failure a reason."""
import math
from numbers import Integral

import pyopencl as cl

from .errors import ContractError, ConvsolveError


def workspace_of(solver, problem):
    """The solver's workspace in bytes; ContractError when the hook raises or answers other than
    an int >= 0."""
    try:
        value = solver.workspace(problem)
    except Exception as exc:  # noqa: BLE001 - a plugin's fault, reported as the solver's
        raise ContractError(solver.name, f"workspace() raised {exc!r}") from exc
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 0:
        raise ContractError(solver.name, f"workspace() returned {value!r}, not bytes >= 0")
    return int(value)


def wti_of(solver, problem):
    """The solver's WTI, in (0, 1] or negative (unknown); ContractError when the hook raises or
    answers anything else (NaN, 0, above 1, not a number)."""
    try:
        value = float(solver.get_wti(problem))
    except Exception as exc:  # noqa: BLE001
        raise ContractError(solver.name, f"get_wti() raised {exc!r}") from exc
    if not math.isfinite(value) or value == 0 or value > 1:
        raise ContractError(solver.name,
                            f"get_wti() returned {value!r}, not in (0, 1] or negative")
    return value


def build_invoker(solver, problem, handle):
    """The solver's invoker; ContractError when build_invoker raises anything but a
    convsolve error (a BuildError passes through) or returns something not callable."""
    try:
        invoker = solver.build_invoker(problem, handle)
    except ConvsolveError:
        raise
    except Exception as exc:  # noqa: BLE001 - a plugin's fault, reported as the solver's
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
