"""Handle: one OpenCL device with its context and command queue; builds kernels and keeps invokers.

A handle's queue does not profile unless it is made with ``profiling=True``: on NVIDIA's OpenCL
a launch that returns a profiling event costs the host 11 us against 5.5 us on a plain queue
(the event's timestamps), which is most of what a batch-1 network's calls cost.  What times
kernels (find, tuning, a plan's trials, the benchmarks) works on the handle's timing twin
(``Handle.timing``): the same device, context, programs and rankings, a profiling queue of its
own, and its own invokers, plans, scratch and packed weights (invokers hold their queue).
``timing_section`` orders the twin's queue after what the handle's queue holds and the handle's
queue after what the twin enqueued, so find on the caller's buffers sees their contents and
leaves its outputs before the caller's next call, without the host waiting.
"""
from __future__ import annotations

import atexit
import contextlib
import copy
import logging
import re
import threading
import weakref
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from importlib import resources
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pyopencl as cl

from .. import env
from ..errors import BuildError, DeviceError, ValidationError
from ..solvers.calls import build_invoker, events_of
from ..tuning import config_key
from .kernel_cache import KernelCache, cache_dir, cache_key, included_sources
from .timing import held
from .weights_cache import WeightsCache

if TYPE_CHECKING:
    from importlib.abc import Traversable

    from ..engine.solutions import Solution
    from ..hookspecs import Invoker, Solver
    from ..problem import Problem
    from ..tuning import Config

#: A (platform, device) pair, as list_devices gives them.
DevicePair = tuple[cl.Platform, cl.Device]
_T = TypeVar("_T")

log = logging.getLogger("convsolve")

CORE_KERNELS = resources.files("convsolve") / "kernels"
#: Every Handle not yet garbage-collected, released at interpreter exit (release_all).
_live: weakref.WeakSet[Handle] = weakref.WeakSet()
_PROBE_SOURCE = "__kernel void cs_probe(__global float *a) { a[get_global_id(0)] += 1.0f; }"
_IDENTIFIER_RE = re.compile(r"^[A-Za-z_]\w*$")
_POCL_HINT = ("install Debian's PoCL (apt-get install pocl-opencl-icd) for the CPU, or a GPU "
              "driver's OpenCL ICD; PyPI's pocl-binary-distribution cannot build kernels on "
              "recent CPUs ('unknown target CPU generic')")


class Kernel(cl.Kernel):
    """A pyopencl Kernel whose scalar arguments are packed by type from its first ``set_args``
    on: that call's numpy scalars fix their arguments' dtypes (set_scalar_arg_dtypes; buffers
    and None stay generic).  pyopencl's generic path costs about 9 us per numpy scalar, which
    made a Winograd launch's 19 arguments 150 us of host time; typed, all of them take 8 us.
    Dtypes its maker sets itself (``set_scalar_arg_dtypes``) are kept."""

    def set_args(self, *args: Any) -> None:
        self.set_scalar_arg_dtypes([a.dtype if isinstance(a, np.generic) else None
                                    for a in args])
        self.set_args(*args)

    def set_scalar_arg_dtypes(self, arg_dtypes: Any) -> None:
        super().set_scalar_arg_dtypes(arg_dtypes)
        self.set_args = cl.Kernel.set_args.__get__(self)   # type: ignore[method-assign]


# {{{ device choice

def list_devices() -> list[DevicePair]:
    """Every (platform, device) pyopencl sees, in platform order; the index is CONVSOLVE_DEVICE's."""
    try:
        platforms = cl.get_platforms()
    except cl.Error:
        return []
    found: list[DevicePair] = []
    for platform in platforms:
        try:
            found.extend((platform, device) for device in platform.get_devices())
        except cl.Error:
            continue
    return found


def describe(platform: cl.Platform, device: cl.Device) -> str:
    """'platform name: device name', the text CONVSOLVE_DEVICE substrings are matched against."""
    return f"{platform.name.strip()}: {device.name.strip()}"


def probe(device: cl.Device) -> str | None:
    """None when ``device`` builds and runs a tiny kernel, else the reason it cannot."""
    try:
        context = cl.Context([device])
        program = cl.Program(context, _PROBE_SOURCE).build()
        queue = cl.CommandQueue(context)
        buffer = cl.Buffer(context, cl.mem_flags.READ_WRITE, 4)
        program.cs_probe(queue, (1,), None, buffer)
        queue.finish()
        return None
    except cl.Error as exc:
        return " ".join(str(exc).split())[:300]


#: Substrings (lower case) of 'platform: device' that mark a simulator: correct, but about 1000x
#: slower than real hardware, so never a default device (Oclgrind, the kernel checker).
SIMULATORS = ("oclgrind",)


def _kinds(device):
    """The device-type bits ``device`` reports, of CPU, GPU and ACCELERATOR (DEFAULT ignored)."""
    return {kind for kind in ("CPU", "GPU", "ACCELERATOR")
            if device.type & getattr(cl.device_type, kind)}


def is_gpu(device: cl.Device) -> bool:
    """True for a GPU: the GPU type bit and no CPU or accelerator bit (Oclgrind sets them all)."""
    return _kinds(device) == {"GPU"}


def caches_binaries(platform: cl.Platform) -> bool:
    """Whether convsolve's binary cache serves this platform: every one but PoCL, which keeps
    its own cache of built programs (POCL_CACHE_DIR; a hit builds in 0.02 s) and, asked for a
    program's binary, first compiles every kernel in it (1.8 s for direct's tiled.cl, seven
    times its build)."""
    return "Portable Computing Language" not in platform.name


def is_simulator(platform: cl.Platform, device: cl.Device) -> bool:
    """True for a simulator (Oclgrind, or any device claiming more than one of CPU, GPU and
    accelerator): usable when named, never chosen by default."""
    text = describe(platform, device).lower()
    return len(_kinds(device)) > 1 or any(name in text for name in SIMULATORS)


def default_order(devices: Iterable[DevicePair]) -> list[DevicePair]:
    """``devices`` ((platform, device) pairs) in the order the default choice tries them: GPUs,
    then PoCL, then the rest, each in platform order; simulators left out."""
    def rank(pair: DevicePair) -> tuple[bool, bool]:
        platform, device = pair
        return (not is_gpu(device), "portable computing language" not in platform.name.lower())
    return sorted((pair for pair in devices if not is_simulator(*pair)), key=rank)


def choose_device(spec: int | str | None = None) -> cl.Device:
    """The device named by ``spec`` (index or substring), else by CONVSOLVE_DEVICE, else the default.

    The default is the first GPU that builds kernels, else the first PoCL CPU device that does,
    else any other device that does; a simulator (Oclgrind) only when named.
    """
    devices = list_devices()
    if not devices:
        raise DeviceError(f"no OpenCL platform found: {_POCL_HINT}")
    spec = env.DEVICE.raw() if spec is None else str(spec)
    if spec:
        if spec.isdigit():
            if int(spec) >= len(devices):
                raise ValidationError("device", spec, f"only {len(devices)} devices are visible")
            chosen = [devices[int(spec)]]
        else:
            chosen = [d for d in devices if spec.lower() in describe(*d).lower()]
            if not chosen:
                raise ValidationError("device", spec, "matches none of: " + "; ".join(
                    describe(*d) for d in devices))
    else:
        chosen = default_order(devices)
        if not chosen:
            raise DeviceError("only simulators are visible (" + "; ".join(
                describe(*d) for d in devices) + "): name one with CONVSOLVE_DEVICE (e.g. "
                f"CONVSOLVE_DEVICE=Oclgrind) to use it, or {_POCL_HINT}")
    failures = []
    for platform, device in chosen:
        reason = probe(device)
        if reason is None:
            return device
        failures.append(f"{describe(platform, device)}: {reason}")
        log.info("device %r cannot build kernels: %s", describe(platform, device), reason)
    raise DeviceError("no OpenCL device can build kernels (" + "; ".join(failures) + f"); {_POCL_HINT}")

# }}}


def _build_log(message):
    """The compiler's log out of a pyopencl build error: the non-empty lines after 'Build on ...'."""
    lines = message.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Build on ")]
    body = lines[starts[-1] + 1:] if starts else lines
    return "\n".join(line for line in body if line.strip() and line.strip() != "(options: )")


def format_defines(defines: Mapping[str, int | float | str] | None) -> list[str]:
    """``-D NAME=value`` options, sorted by name; values must be ints, floats or identifiers."""
    options = []
    for name, value in sorted((defines or {}).items()):   # by name: names are unique
        if not _IDENTIFIER_RE.match(str(name)):
            raise ValidationError("define name", name, "must be a C identifier")
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ValidationError(f"define {name}", value, "must be an int, a float or an identifier")
        if isinstance(value, str) and not _IDENTIFIER_RE.match(value):
            raise ValidationError(f"define {name}", value, "a text value must be an identifier")
        text = f"{value!r}f" if isinstance(value, float) else str(value)
        options.append(f"-D{name}={text}")
    return options


class Handle:
    """One OpenCL device, its context and command queue, and what was built on it.

    ``context`` and ``queue`` are the pyopencl objects, so callers allocate buffers and
    synchronise with them.  ``profiling=True`` makes the queue profile, so the events of
    ``run`` carry timestamps (what the benchmarks and ``convsolve conv -t`` read); otherwise
    timing goes through ``timing`` (module docstring).  The handle is safe to use from several
    threads at once: builds run in parallel, and the invokers it keeps enqueue one call at a
    time on its in-order queue.
    """

    def __init__(self, device: cl.Device | int | str | None = None, *,
                 profiling: bool = False) -> None:
        if not isinstance(profiling, bool):
            raise ValidationError("profiling", profiling, "expected True or False")
        self.device = device if isinstance(device, cl.Device) else choose_device(device)
        self.context = cl.Context([self.device])
        #: Whether ``queue`` profiles (its events carry timestamps).
        self.profiling = profiling
        self.queue = self._make_queue(profiling)
        platform = self.device.platform
        self.identity = {
            "platform": platform.name.strip(), "platform_version": platform.version.strip(),
            "device": self.device.name.strip(), "driver": self.device.driver_version.strip(),
            "compute_units": self.device.max_compute_units}
        self.is_cpu = bool(self.device.type & cl.device_type.CPU)
        self.is_gpu = is_gpu(self.device)   # only a device that is nothing but a GPU
        self.is_simulator = is_simulator(platform, self.device)
        # Oclgrind crashes when two programs build at once on one context: build one at a time
        self._build_lock = threading.Lock() if self.is_simulator else None
        directory = cache_dir() if caches_binaries(platform) else None
        self._kernel_cache = KernelCache(directory) if directory else None
        self._programs: dict[str, cl.Program] = {}   # cache key -> built program
        # (solver name, problem key, config key, queue tag) -> invoker
        self._invokers: dict[tuple[Hashable, ...], Callable[..., list[cl.Event]]] = {}
        # (solver name, problem key) -> why its build was given up
        self._hung: dict[tuple[str, str], str] = {}
        self._scratch: cl.Buffer | None = None      # reusable workspace buffer for run()
        # what keys this queue's invokers and plans in the dicts a timing twin shares
        self._queue_tag = "profiling" if profiling else "plain"
        self._twin: Handle | None = None   # the timing twin, made on first use
        self._twin_of = id(self)           # a shallow copy makes its own twin
        self._lock = threading.Lock()
        self._key_locks: dict[Hashable, threading.Lock] = {}
        self._enqueue_lock = threading.Lock()   # one invoker sets its kernels' arguments at a time
        #: Packed weights of calls with constant_weights=True (weights_cache.py).
        self.weights_cache = WeightsCache(self.context, self._enqueue_lock)
        # find-db key -> {family: fastest solver name}, from find
        self._best: dict[str, dict[str, str]] = {}
        # find-db key -> the fastest solver of find's ranking
        self._first: dict[str, str] = {}
        # ((solver, problem, max_tolerance, deterministic), queue tag) -> the engine's Plan
        self._plans: dict[Hashable, Any] = {}
        # [ranking generation], shared with the timing twin (ranking_generation)
        self._generation = [0]
        _live.add(self)
        self._born_as = id(self)   # a shallow copy keeps this value under another id
        log.info("handle on %s (driver %s, %d compute units)", self.name,
                 self.identity["driver"], self.identity["compute_units"])

    def _make_queue(self, profiling: bool) -> cl.CommandQueue:
        if profiling:
            return cl.CommandQueue(self.context,
                                   properties=cl.command_queue_properties.PROFILING_ENABLE)
        return cl.CommandQueue(self.context)

    @property
    def ranking_generation(self) -> int:
        """Moves when what plans resolved may have changed: a find ranked a problem, an invoker
        failed, the handle released what it kept (plans compare it on every run)."""
        return self._generation[0]

    @property
    def timing(self) -> Handle:
        """The handle whose queue profiles: this one when made with ``profiling=True``, else
        its timing twin (module docstring), made on first use.  Enqueue on it inside
        ``timing_section`` where the work touches buffers this handle's queue also uses."""
        if self.profiling:
            return self
        with self._lock:
            if self._twin is None or self._twin_of != id(self):
                twin = copy.copy(self)   # shares programs, invokers, plans, rankings, locks
                twin.profiling, twin.queue = True, self._make_queue(True)
                twin._queue_tag, twin._scratch, twin._twin = "profiling", None, None
                twin.weights_cache = WeightsCache(self.context, self._enqueue_lock)
                self._twin, self._twin_of = twin, id(self)
            return self._twin

    @contextlib.contextmanager
    def timing_section(self) -> Iterator[Handle]:
        """A context giving ``timing``, its queue ordered after everything enqueued on this
        handle's queue so far, and this queue after everything the section enqueued on it
        (markers and barriers: the host never waits).  Nothing to order with ``profiling``."""
        timing = self.timing
        if timing is self:
            yield self
            return
        cl.enqueue_barrier(timing.queue, wait_for=[cl.enqueue_marker(self.queue)])
        try:
            yield timing
        finally:
            cl.enqueue_barrier(self.queue, wait_for=[cl.enqueue_marker(timing.queue)])

    @property
    def name(self) -> str:
        """'platform: device', as ``convsolve devices`` lists it."""
        return describe(self.device.platform, self.device)

    @property
    def db_key(self) -> str:
        """The device's id in find-dbs: device name and compute units (not the driver version)."""
        return f"{self.identity['device']}/{self.identity['compute_units']}cu"

    # {{{ building

    def build(self, file: Traversable, kernel: str,
              defines: Mapping[str, int | float | str] | None = None) -> cl.Kernel:
        """A fresh ``Kernel`` (a typed ``pyopencl.Kernel``) named ``kernel`` from the .cl ``file``
        built with ``defines``.

        ``file`` is a path or an importlib.resources file (a plugin's ``kernels/x.cl``); the core's
        ``convsolve.h`` and the file's own folder are on the include path.  Programs are built once
        per handle and kept in the on-disk kernel cache (on PoCL, in PoCL's own); each call
        returns a new Kernel object, so invokers never share argument state.
        """
        source = file.read_text()
        include_dirs = [str(CORE_KERNELS)]
        if hasattr(file, "parent"):   # a path: its own folder serves its includes
            include_dirs.insert(0, str(file.parent))
        defines_options = format_defines(defines)
        key = cache_key(source, included_sources(source, include_dirs), defines_options,
                        self.identity)
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            program = self._programs.get(key)
            if program is None:
                options = defines_options + [f"-I{d}" for d in include_dirs]
                with self._build_lock or contextlib.nullcontext(), held(alone=False):
                    program = self._program(key, source, options, file)
                self._programs[key] = program
        try:
            return Kernel(program, kernel)
        except cl.Error as exc:
            raise BuildError(f"{file}: no kernel {kernel!r} in the built program ({exc})") from exc

    def _program(self, key, source, options, file):
        """A built program: from the kernel cache when it holds a good binary, else from source."""
        cache = self._kernel_cache
        binary = cache.load(key) if cache else None
        if binary is not None:
            try:
                return cl.Program(self.context, [self.device], [binary]).build(options=options)
            except cl.Error as exc:
                log.warning("kernel cache: entry %s does not load (%s); rebuilding", key[:12], exc)
                cache.discard(key)
        try:
            program = cl.Program(self.context, source).build(options=options)
        except cl.Error as exc:
            log_text = _build_log(str(exc))
            raise BuildError(
                f"building {file} for {self.name} failed (CL_BUILD_PROGRAM_FAILURE); "
                f"options: {' '.join(options)}\n{log_text}", log=log_text) from exc
        if cache:
            cache.store(key, program.get_info(cl.program_info.BINARIES)[0])
        log.debug("built %s with %s", file, " ".join(options))
        return program

    def invoker(self, solver: Solver, problem: Problem, config: Config | None = None) -> Invoker:
        """The invoker of ``solver`` for ``problem`` (a tunable solver's built with ``config``),
        built on first use and kept in the handle; a build find gave up on (mark_hung) raises
        BuildError at once."""
        key = (solver.name, problem.key(), config_key(config))
        if key[:2] in self._hung:   # its thread may still hold the key's lock
            raise BuildError(f"{solver.name!r} on {problem.key()}: {self._hung[key[:2]]}")
        return self.kept(key, solver.name, lambda: build_invoker(solver, problem, self, config))

    def kept(self, key: tuple[Hashable, ...], name: str,
             build: Callable[[], Callable[..., list[cl.Event]]]) -> Callable[..., list[cl.Event]]:
        """The invoker ``build()`` returns, built on first use under ``key`` (a tuple whose
        first two items name its maker and what it is for) and kept in the handle: solvers'
        invokers and the core's own (backward-bias) alike.  It enqueues under the handle's lock
        and must return events (PluginError names ``name`` otherwise)."""
        key = (*key, self._queue_tag)   # the timing twin's invokers enqueue on its own queue
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            if key not in self._invokers:
                self._invokers[key] = self._serialised(name, build())
            return self._invokers[key]

    def _serialised(self, name, invoker):
        """``invoker`` holding the handle's enqueue lock while it sets arguments and enqueues,
        its result checked to be events (PluginError names solver ``name`` otherwise).

        A kept invoker's kernel objects are shared by every caller, and clSetKernelArg on one
        kernel from two threads races (the other thread's arguments get launched); the queue
        is in order, so the kernels then run one call after the other, scratch included.
        """
        lock = self._enqueue_lock

        def serialised(*args):
            with lock:
                return events_of(name, invoker(*args))
        return serialised

    def mark_hung(self, solver: Solver, problem: Problem, reason: str) -> None:
        """Remember that building ``solver`` for ``problem`` never returned (find gave up)."""
        with self._lock:
            self._hung[(solver.name, problem.key())] = f"its build never returned ({reason})"

    def forget_invoker(self, solver: Solver, problem: Problem) -> None:
        """Drop the kept invokers of ``solver`` for ``problem`` (after one failed to run), every
        config's on either queue; plans resolve again."""
        with self._lock:
            for key in [k for k in self._invokers if k[:2] == (solver.name, problem.key())]:
                del self._invokers[key]
            self._generation[0] += 1

    # }}}

    # {{{ what find ranked, and the plans run uses

    def remember_ranking(self, key: str, solutions: Iterable[Solution]) -> None:
        """Keep find's fastest solver and each family's fastest among ``solutions`` (find's
        ranking, fastest first) for plans of no solver or a family; ``key`` is the problem's
        find-db key under the call's policy."""
        solutions = list(solutions)
        with self._lock:
            best = dict(self._best.get(key, {}))
            for solution in sorted(solutions, key=lambda s: s.time_ms, reverse=True):
                best[solution.family] = solution.solver
            first = solutions[0].solver if solutions else self._first.get(key)
            if best != self._best.get(key) or first != self._first.get(key):
                self._generation[0] += 1   # plans may now mean another solver
                self._best[key] = best
                if first is not None:
                    self._first[key] = first

    def best_of_family(self, key: str, family: str) -> str | None:
        """The name of ``family``'s fastest solver for the problem of find-db key ``key`` as find
        ranked it, or None."""
        with self._lock:
            return self._best.get(key, {}).get(family)

    def best_solver(self, key: str) -> str | None:
        """The fastest solver of this process's last find of find-db key ``key``, or None."""
        with self._lock:
            return self._first.get(key)

    def kept_plan(self, key: Hashable, make: Callable[[], _T]) -> _T:
        """The plan kept under ``key``, else ``make()``'s, kept (a failed make keeps nothing)."""
        key = (key, self._queue_tag)   # a plan runs its invokers' queue
        with self._lock:
            kept = self._plans.get(key)
        if kept is None:
            kept = make()
            with self._lock:
                kept = self._plans.setdefault(key, kept)
        return kept

    def forget_rankings(self) -> None:
        """Drop what find ranked and the plans kept (invokers and programs stay built)."""
        with self._lock:
            self._best.clear()
            self._first.clear()
            self._plans.clear()
            self._generation[0] += 1

    # }}}

    def scratch(self, nbytes: int, solver_name: str = "a solver") -> cl.Buffer | None:
        """A workspace buffer of at least ``nbytes`` (None for 0), reused and grown across calls;
        a ValidationError naming ``solver_name`` when no buffer of the device can be that big."""
        if nbytes <= 0:
            return None
        if nbytes > self.device.max_mem_alloc_size:
            raise ValidationError("workspace", nbytes, f"{solver_name!r} needs more than the "
                                  f"largest buffer of {self.name} "
                                  f"({self.device.max_mem_alloc_size} bytes)")
        with self._lock:
            if self._scratch is None or self._scratch.size < nbytes:
                self._scratch = cl.Buffer(self.context, cl.mem_flags.READ_WRITE, nbytes)
            return self._scratch

    def release(self) -> None:
        """Drop every invoker, program, packed weights and scratch buffer the handle and its
        timing twin keep (kernels first, then the buffers their arguments may still name), so
        that OpenCL releases them now, in that order; the handle stays usable and builds again
        on demand.
        Nothing waits for the queue (a kernel that never finishes would hold the exit): OpenCL
        keeps what queued work uses until it completes.  Called for every live handle at
        interpreter exit."""
        with self._lock:
            scratches = [h._scratch for h in self._with_twin() if h._scratch is not None]
            self._drop_kept()
            for scratch in scratches:
                scratch.release()

    def _with_twin(self) -> list[Handle]:
        """This handle, and its timing twin if one was made (not a shallow copy's original's)."""
        return [self] if self._twin is None or self._twin_of != id(self) else [self, self._twin]

    def _drop_kept(self) -> None:
        """Let go of the kept invokers, programs, packed weights and scratch, the timing
        twin's too (no lock: __del__ calls it)."""
        self._plans.clear()
        self._generation[0] += 1
        self._invokers.clear()
        for handle in self._with_twin():
            handle.weights_cache.clear()
            handle._scratch = None
        self._programs.clear()

    def __del__(self) -> None:
        # The kept invokers close over the handle, so a handle nobody holds is a reference
        # cycle, and the garbage collector frees a cycle's objects in no set order: NVIDIA's
        # OpenCL crashed when it met a context or queue released before kernels, programs and
        # buffers of it (RELIABILITY.md).  A finalizer runs before the cycle is cleared, so the
        # kernels and buffers go first.  A shallow copy (copy.copy, as tests make with a device's
        # limits changed) shares what it keeps with its original and leaves it alone.
        if getattr(self, "_born_as", None) == id(self):
            self._drop_kept()

    def __repr__(self) -> str:
        return f"<convsolve.Handle {self.name!r}>"


@atexit.register
def release_all() -> None:
    """Release every live Handle (Handle.release), before the interpreter tears modules down."""
    for handle in list(_live):
        handle.release()
