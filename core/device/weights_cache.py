"""Constant weights: the keyword's checks, solvers' packings (build_packing) and the handle's
cache of packed weights, bounded by bytes and least recently used first out.

A caller that passes ``constant_weights=True`` promises that its weights buffer keeps its
contents until it passes another ``weights_version``.  The cache keys packed weights by that
buffer (a device buffer by its cl_mem, a host array by identity; the entry holds a reference to
it, so no other buffer can take its address while it is cached), the version, the solver, its
config and the problem.  A new version of a kept buffer repacks in place; a write without a new
version is the caller's broken promise and goes unseen.  The cache belongs to one handle (one
context) and is emptied by ``Handle.release``, so packed weights never outlive their context.
"""
from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Hashable
from numbers import Integral
from typing import TYPE_CHECKING, Any, NamedTuple

import pyopencl as cl

from .. import env
from ..errors import ContractError, ConvsolveError, ValidationError
from ..hookspecs import Packing
from ..problem import Direction
from ..solvers.calls import call_hook, default_config_of, events_of, is_tunable
from ..tuning import config_key

if TYPE_CHECKING:
    import threading

    from ..hookspecs import Buffers, Solver
    from ..problem import Problem
    from ..tuning import Config
    from .handle import Handle

log = logging.getLogger("convsolve")

#: What a find-db key ends with when find ranked with the weights constant (the cached cost).
DB_SUFFIX = "-cw"


def check_keywords(problem: Problem, constant_weights: object, weights_version: object) -> None:
    """Refuse a ``constant_weights`` that is not a bool, a ``weights_version`` that is not an
    int >= 0, and constant weights where the weights are the output (backward-weights)."""
    if not isinstance(constant_weights, bool):
        raise ValidationError("constant_weights", constant_weights, "expected True or False")
    if isinstance(weights_version, bool) or not isinstance(weights_version, Integral) \
            or weights_version < 0:
        raise ValidationError("weights_version", weights_version,
                              "expected an int >= 0 that the caller bumps when w changes")
    if constant_weights and problem.direction is Direction.BACKWARD_WEIGHTS:
        raise ValidationError("constant_weights", True, "backward-weights writes w (the "
                              "weights are its output): only forward and backward-data read "
                              "constant weights")


def db_key(key: str, constant_weights: bool) -> str:
    """The find-db key ``key`` (a policy's) of a find told the weights are constant or not."""
    return key + DB_SUFFIX if constant_weights else key


class Built(NamedTuple):
    """A solver's checked Packing for one problem and config, with what names it in the cache."""

    key: tuple[Hashable, ...]   # (solver name, problem key, config key)
    name: str
    nbytes: int
    pack: Any
    invoker: Any


def build_packing(solver: Solver, problem: Problem, handle: Handle,
                  config: Config | None) -> Built | None:
    """The solver's packing of ``problem`` (a tunable solver's for ``config``, None: its
    default), or None when it has no build_packing hook, answers None, or fails (logged: the
    solver then runs as without constant weights)."""
    if not callable(getattr(solver, "build_packing", None)):
        return None
    try:
        if config is None and is_tunable(solver):
            config = default_config_of(solver, problem, handle)
        packing = call_hook(solver, "build_packing", problem=problem, handle=handle,
                            config=config)
        if packing is None:
            return None
        if not isinstance(packing, Packing) or isinstance(packing.nbytes, bool) or not (
                isinstance(packing.nbytes, Integral) and packing.nbytes > 0) or not (
                callable(packing.pack) and callable(packing.invoker)):
            raise ContractError(solver.name, f"build_packing() returned {packing!r}, not a "
                                "Packing of nbytes > 0 and two callables")
    except ConvsolveError as exc:
        log.warning("%r on %s: no packing, running without constant weights (%s)",
                    solver.name, problem.key(), getattr(exc, "reason", exc))
        return None
    except Exception as exc:  # noqa: BLE001 - a plugin's bug costs only the cache
        log.warning("%r on %s: build_packing() raised %r; running without constant weights",
                    solver.name, problem.key(), exc)
        return None
    return Built((solver.name, problem.key(), config_key(config)), solver.name,
                 int(packing.nbytes), packing.pack, packing.invoker)


class _Entry:
    """One cached packed-weights buffer: the caller's weights object (held, so its identity
    stays its own), the version packed, the buffer."""

    __slots__ = ("buffer", "owner", "version")

    def __init__(self, owner: object, buffer: cl.Buffer) -> None:
        self.owner, self.version, self.buffer = owner, None, buffer


def _identity(owner: object) -> Hashable:
    """A device buffer's cl_mem, or any other object's identity (a host array)."""
    if isinstance(owner, cl.MemoryObjectHolder):
        return ("buffer", owner.int_ptr)
    return ("object", id(owner))


class WeightsCache:
    """A handle's packed weights (module docstring).  ``lock`` is the handle's enqueue lock:
    packings set their kernels' arguments and enqueue under it, as kept invokers do."""

    def __init__(self, context: cl.Context, lock: threading.Lock) -> None:
        self._context, self._lock = context, lock
        self._entries: OrderedDict[Hashable, _Entry] = OrderedDict()
        self._built: dict[Hashable, Built | None] = {}
        #: Bytes of packed weights held now, and packs run since the cache was last cleared.
        self.nbytes, self.packs = 0, 0

    def __len__(self) -> int:
        return len(self._entries)

    def packing(self, solver: Solver, problem: Problem, handle: Handle,
                config: Config | None) -> Built | None:
        """build_packing's answer, built once per solver, problem and config."""
        key = (solver.name, problem.key(), config_key(config))
        if key not in self._built:
            self._built.setdefault(key, build_packing(solver, problem, handle, config))
        return self._built[key]

    def run(self, built: Built, owner: object, version: int, buffers: Buffers,
            scratch: cl.Buffer | None) -> list[cl.Event] | None:
        """Enqueue ``built``'s invoker from the packed weights of ``owner`` at ``version``,
        packing them from ``buffers.w`` first when the cache lacks them; None (nothing
        enqueued) when they exceed CONVSOLVE_WEIGHTS_CACHE_BYTES: the caller runs the plain
        invoker."""
        limit = env.size_in_bytes(env.WEIGHTS_CACHE_BYTES)
        if built.nbytes > limit:
            log.debug("%r: packed weights of %d bytes exceed %s; not cached", built.name,
                      built.nbytes, env.WEIGHTS_CACHE_BYTES.name)
            return None
        key = (_identity(owner), *built.key)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self._make_room(limit - built.nbytes)
                entry = _Entry(owner, cl.Buffer(self._context, cl.mem_flags.READ_WRITE,
                                                built.nbytes))
                self._entries[key] = entry
                self.nbytes += built.nbytes
            self._entries.move_to_end(key)
            events = []
            if entry.version != version:
                events += events_of(built.name, built.pack(buffers.w, entry.buffer))
                entry.version = version
                self.packs += 1
            return events + events_of(built.name, built.invoker(buffers, scratch, entry.buffer))

    def timing_invoker(self, built: Built, w: cl.Buffer) -> Any:
        """An invoker(buffers, scratch) for find: ``w`` packed once now into a buffer of its
        own (not cached), then each call runs from it: the cost of a call with constant
        weights."""
        packed = cl.Buffer(self._context, cl.mem_flags.READ_WRITE, built.nbytes)
        with self._lock:
            events_of(built.name, built.pack(w, packed))

        def invoker(buffers: Buffers, scratch: cl.Buffer | None) -> list[cl.Event]:
            with self._lock:
                return events_of(built.name, built.invoker(buffers, scratch, packed))
        return invoker

    def _make_room(self, most: int) -> None:
        """Free least recently used entries until at most ``most`` bytes stay held."""
        while self._entries and self.nbytes > most:
            _, entry = self._entries.popitem(last=False)
            self.nbytes -= entry.buffer.size
            entry.buffer.release()

    def clear(self) -> None:
        """Free every packed buffer and forget the packings (Handle.release); OpenCL keeps a
        buffer that queued work still uses until that work completes."""
        entries, self._entries, self._built = self._entries, OrderedDict(), {}
        self.nbytes = self.packs = 0
        for entry in entries.values():
            entry.buffer.release()
