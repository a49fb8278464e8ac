"""Every CONVSOLVE_* environment variable: its name, default and meaning, and how it is parsed.

Values are read when they are used (not once at import), so a program or a test that changes
os.environ sees the change at the next call.  docs/environment.md embeds the table that
docgen.env_markdown() makes of VARS (``convsolve env --markdown``); a test keeps the two equal.
"""
import fnmatch
import logging
import os
from dataclasses import dataclass, field

from .errors import ValidationError

FAMILIES = ("gemm", "direct", "winograd", "fft", "implicit_gemm")


# os.environ's own mapping of encoded names to encoded values where it has one (CPython on
# POSIX; os.environ reads and writes it, so monkeypatch's changes are seen, a C-level putenv is
# not, as with os.environ): a read costs 0.15 us, os.environ.get 1.5 us (AVX-512 Xeon,
# 2026-12-03), and the hot path reads a dozen variables a call.
_ENCODED = os.name == "posix" and isinstance(getattr(os.environ, "_data", None), dict)
_ENVIRON = os.environ._data if _ENCODED else os.environ   # type: ignore[attr-defined]


def _key(name):
    """``name`` as _ENVIRON's key: encoded where _ENVIRON is os.environ's own mapping."""
    return os.fsencode(name) if _ENCODED else name


def _value(key):
    """The variable's stripped text ('' when unset) from its _key."""
    value = _ENVIRON.get(key)
    if value is None:
        return ""
    return (os.fsdecode(value) if _ENCODED else value).strip()


@dataclass(frozen=True)
class Var:
    """One environment variable: name, default (as text, '' for unset) and meaning."""

    name: str
    default: str
    doc: str
    key: object = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "key", _key(self.name))

    def raw(self):
        """The stripped value, or the default when unset or empty."""
        return _value(self.key) or self.default

    def is_set(self):
        """Whether the variable holds a value (not unset, not empty)."""
        return bool(_value(self.key))


VARS = {}


def _declare(name, default, doc):
    VARS[name] = Var(name, default, doc)
    return VARS[name]


# {{{ devices and caches

DEVICE = _declare(
    "CONVSOLVE_DEVICE", "",
    "Device for Handle() when none is passed: an index into the flat list of devices "
    "(`convsolve devices`), or a case-insensitive substring of 'platform name: device name'. "
    "Unset: the first GPU that builds kernels, else PoCL's CPU device, else any other; a "
    "simulator (Oclgrind) only when named.")
TEST_DEVICE = _declare(
    "CONVSOLVE_TEST_DEVICE", "",
    "Device of convsolve.testing's handle fixture (same forms as CONVSOLVE_DEVICE). "
    "Unset: the default device.")
CACHE_DIR = _declare(
    "CONVSOLVE_CACHE_DIR", "",
    "Directory of the kernel binary cache (every platform but PoCL, which keeps its own: "
    "POCL_CACHE_DIR). Unset: platformdirs' user cache dir for 'convsolve'.")
DISABLE_CACHE = _declare(
    "CONVSOLVE_DISABLE_CACHE", "0", "1 turns the on-disk kernel binary cache off.")
ZERO_COPY = _declare(
    "CONVSOLVE_ZERO_COPY", "1",
    "1: on a device that shares host memory (CL_DEVICE_HOST_UNIFIED_MEMORY: PoCL), the numpy "
    "API wraps C-contiguous float32 host arrays at 64-byte aligned addresses (USE_HOST_PTR) "
    "instead of copying them, and writes its output in place (its own array, or out=); 0: "
    "every array is copied in and the output read back.")
USER_DB_PATH = _declare(
    "CONVSOLVE_USER_DB_PATH", "",
    "Path of the user find-db (SQLite). Unset: find_db_v3.sqlite in platformdirs' user data dir.")
SYSTEM_DB_PATH = _declare(
    "CONVSOLVE_SYSTEM_DB_PATH", "",
    "Path of the read-only system db (JSON lines, `convsolve db export`'s format): its find-db "
    "records, and its perf-db records unless CONVSOLVE_SYSTEM_PERF_DB_PATH names another file. "
    "Unset: the one shipped in the package.")
PERF_DB_PATH = _declare(
    "CONVSOLVE_PERF_DB_PATH", "",
    "Path of the user perf-db (SQLite: every config tried per tunable solver). Unset: "
    "perf_db_v1.sqlite in platformdirs' user data dir.")
SYSTEM_PERF_DB_PATH = _declare(
    "CONVSOLVE_SYSTEM_PERF_DB_PATH", "",
    "Path of the read-only system perf-db (JSON lines). Unset: the system find-db's file "
    "(CONVSOLVE_SYSTEM_DB_PATH, else the one shipped in the package), which holds both.")

# }}}

# {{{ plugins and solvers

DISABLE_PLUGIN_AUTOLOAD = _declare(
    "CONVSOLVE_DISABLE_PLUGIN_AUTOLOAD", "0",
    "1 stops loading every plugin of the 'convsolve.solvers' entry-point group; "
    "only those named in CONVSOLVE_PLUGINS are loaded.")
PLUGINS = _declare(
    "CONVSOLVE_PLUGINS", "",
    "Comma list of entry-point names (e.g. 'direct,gemm') to load when autoload is off.")
STRICT_PLUGINS = _declare(
    "CONVSOLVE_STRICT_PLUGINS", "0",
    "1 makes a plugin that fails to import or breaks the solver contract a fatal PluginError "
    "instead of a logged skip.")
DISABLE_SOLVERS = _declare(
    "CONVSOLVE_DISABLE_SOLVERS", "",
    "Comma list of solver names or fnmatch globs (e.g. 'direct.Naive*') to turn off.")
ALLOW_REDUCED_PRECISION = _declare(
    "CONVSOLVE_ALLOW_REDUCED_PRECISION", "0",
    "1 lets solvers that declare reduced_precision (less than float32, e.g. TF32) be used.")
MAX_TOLERANCE = _declare(
    "CONVSOLVE_MAX_TOLERANCE", "",
    "Numerical policy of calls that set no max_tolerance: solvers whose declared tolerance "
    "(relative RMS error against float64, e.g. Winograd's or FFT's) exceeds it are left out, "
    "and the find-db keeps their rankings apart. Unset: every tolerance is admitted.")
DETERMINISTIC = _declare(
    "CONVSOLVE_DETERMINISTIC", "0",
    "1: calls that set no deterministic= use only solvers that declare deterministic = True "
    "(as torch.backends.cudnn.deterministic); the find-db keeps their rankings apart.")
ERRATA = _declare(
    "CONVSOLVE_ERRATA", "",
    "Path of a user errata file (JSON, docs/environment.md's Errata): entries that exclude a "
    "solver for a direction, device or problem, each with its reason; it applies beside the one "
    "shipped in the package. A missing or malformed file is an error naming it.")
FAMILY_SWITCHES = {
    family: _declare(
        f"CONVSOLVE_DEBUG_CONV_{family.upper()}", "1",
        f"0 turns off every solver of the {family!r} family (solver.family == {family!r}).")
    for family in FAMILIES
}

# }}}

# {{{ find

FIND_MODE = _declare(
    "CONVSOLVE_FIND_MODE", "DYNAMIC_HYBRID",
    "NORMAL (1), FAST (2), HYBRID (3), DYNAMIC_HYBRID (5), TRUST_VERIFY (6) or "
    "TRUST_VERIFY_FULL (7), by name or MIOpen's number.")
FIND_LIMIT = _declare(
    "CONVSOLVE_FIND_LIMIT", "",
    "Budgeted find (cuDNN's benchmark_limit): on a find-db miss, benchmark only the learned "
    "ranking's top N solvers, or 'auto' (1 to 3, by the ranking's confidence); the rest are "
    "returned with predicted times. Unset: benchmark every candidate. find(limit=...) overrides.")
HEURISTICS = _declare(
    "CONVSOLVE_HEURISTICS", "1",
    "The learned solver ranking of immediate mode, FAST find and budgeted find: 1 uses the model "
    "for the device (user's, else shipped, along the device's keys), 0 ranks by WTI only, a path "
    "uses that model file for every device.")
COMPILE_PARALLEL_LEVEL = _declare(
    "CONVSOLVE_COMPILE_PARALLEL_LEVEL", "",
    "Threads that build find's candidates at once, in process (a worker process builds one at a "
    "time). Unset: the number of CPUs; 1 builds serially.")
DEBUG_COMPILE_ONLY = _declare(
    "CONVSOLVE_DEBUG_COMPILE_ONLY", "0",
    "1 makes find stop after building every candidate (caches warmed, nothing timed or "
    "recorded); find then returns an empty list.")
WORKSPACE_LIMIT = _declare(
    "CONVSOLVE_WORKSPACE_LIMIT", "1G",
    "Most workspace find allocates itself when called with scratch=None; bytes, with an "
    "optional K, M or G suffix (powers of 1024).")
WEIGHTS_CACHE_BYTES = _declare(
    "CONVSOLVE_WEIGHTS_CACHE_BYTES", "512M",
    "Most device memory a handle's weights cache holds for calls with constant_weights=True "
    "(solvers' packed or transformed filters, build_packing); bytes, with an optional K, M or "
    "G suffix. Least recently used packed weights are freed first; weights larger than the "
    "bound are not cached (those calls pack per call, as without the keyword); 0 caches "
    "nothing.")
FIND_SOLVER_BUDGET_MS = _declare(
    "CONVSOLVE_FIND_SOLVER_BUDGET_MS", "1000",
    "Time find spends timing one solver, in ms of kernel time: sampling stops once it is spent.")
FIND_BUILD_TIMEOUT_S = _declare(
    "CONVSOLVE_FIND_BUILD_TIMEOUT_S", "300",
    "Seconds one candidate's build_invoker may take in find; a build still running then is "
    "skipped (and recorded as failed), its thread left behind. Also the longest a Dask worker "
    "on PoCL waits to hold the device alone for a timing before timing without it.")
FIND_RUN_TIMEOUT_S = _declare(
    "CONVSOLVE_FIND_RUN_TIMEOUT_S", "60",
    "Seconds one run of a candidate may take in find before it is given up as hung. In process "
    "(CONVSOLVE_FIND_ISOLATION=none) the device queue then stays blocked, so find fails naming "
    "the solver; with isolation the worker is restarted and find goes on.")
FIND_ISOLATION = _declare(
    "CONVSOLVE_FIND_ISOLATION", "none",
    "none: find builds and times candidates in this process, on the caller's buffers. process: "
    "in a long-lived worker process per device, on random tensors, so a solver that hangs or "
    "kills the OpenCL runtime costs a worker restart instead of the caller.")
FIND_VERIFY = _declare(
    "CONVSOLVE_FIND_VERIFY", "0",
    "1 makes find compare each candidate's output with the float64 reference (up to 1024 "
    "sampled elements) before it may enter the find-db; a wrong solver is recorded as failed. "
    "find(verify=...) overrides it.")
CHECK_NUMERICS = _declare(
    "CONVSOLVE_CHECK_NUMERICS", "0",
    "1 makes run() scan its inputs and output for NaN/inf after each call and log a warning "
    "naming the tensor and the solver; 2 raises NumericsError instead. Waits for the kernels.")

# }}}

# {{{ tuning

FIND_ENFORCE = _declare(
    "CONVSOLVE_FIND_ENFORCE", "NONE",
    "As MIOPEN_FIND_ENFORCE: NONE (1); DB_UPDATE (2) benchmarks again on a find-db hit; SEARCH "
    "(3) tunes the tunable solvers that have no perf-db entry for the problem, as "
    "find(exhaustive=True) does; SEARCH_DB_UPDATE (4) tunes them even where they have one; "
    "DB_CLEAN (5) deletes the problem's user find-db and perf-db records first.")
TUNING_BUDGET_CONFIGS = _declare(
    "CONVSOLVE_TUNING_BUDGET_CONFIGS", "48",
    "Most configs one search times per solver and problem: find's exhaustive search, the "
    "TRUST_VERIFY modes and, when set, convsolve tune (unset, tune's default is 24; its "
    "--budget-configs overrides both).")
TUNING_BUDGET_S = _declare(
    "CONVSOLVE_TUNING_BUDGET_S", "30",
    "Most wall seconds one search spends per solver and problem, builds included; convsolve "
    "tune's too when set (unset, tune's default is 8; --budget-s).")
TUNING_PATIENCE = _declare(
    "CONVSOLVE_TUNING_PATIENCE", "12",
    "A search stops after this many timed configs in a row that are not 1% faster than the "
    "best so far; convsolve tune's too when set (unset, tune's default is 8; --patience).")
TRUST_VERIFY_SLOWDOWN = _declare(
    "CONVSOLVE_TRUST_VERIFY_SLOWDOWN", "1.25",
    "TRUST_VERIFY find modes: a recorded winner re-timed this many times slower than its record "
    "makes find benchmark and tune the problem again.")

# }}}

LOG_LEVEL = _declare(
    "CONVSOLVE_LOG_LEVEL", "WARNING",
    "Level of the 'convsolve' logger: DEBUG, INFO (every skip and fallback), WARNING, ERROR.")


# {{{ parsers

def flag(var):
    """True for 1/true/yes/on, False for 0/false/no/off; anything else is an error."""
    value = var.raw().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValidationError(var.name, value, "expected 1 or 0")


def integer(var, minimum=None):
    """The value as an int (None when unset), at least ``minimum``."""
    value = var.raw()
    if not value:
        return None
    try:
        number = int(value)
    except ValueError:
        raise ValidationError(var.name, value, "expected an integer") from None
    if minimum is not None and number < minimum:
        raise ValidationError(var.name, value, f"must be at least {minimum}")
    return number


def positive_number(var):
    """The value as a finite float > 0."""
    value = var.raw()
    try:
        number = float(value)
    except ValueError:
        raise ValidationError(var.name, value, "expected a number") from None
    if not 0 < number < float("inf"):
        raise ValidationError(var.name, value, "must be a finite number > 0")
    return number


def names(var):
    """The value as a list of stripped, non-empty comma-separated names."""
    return [part.strip() for part in var.raw().split(",") if part.strip()]


def size_in_bytes(var):
    """The value as a byte count: digits with an optional K, M or G suffix."""
    value = var.raw().upper().removesuffix("B")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(value[-1:], 1)
    digits = value[:-1] if scale > 1 else value
    if not digits.isdigit():
        raise ValidationError(var.name, var.raw(), "expected bytes such as 512M or 2G")
    return int(digits) * scale


def disabled_by(solver_name, family):
    """The switch (e.g. 'CONVSOLVE_DEBUG_CONV_GEMM=0') that turns a solver off, or None."""
    switch = FAMILY_SWITCHES.get(family)
    if switch is not None and not flag(switch):
        return f"{switch.name}={switch.raw()}"
    for pattern in names(DISABLE_SOLVERS):
        if fnmatch.fnmatchcase(solver_name, pattern):
            return f"{DISABLE_SOLVERS.name} ({pattern!r})"
    return None

# }}}


#: Variables whose values what plans resolved depends on: those that change which solvers exist
#: or may be used, and the numerics check that runs after each call (see generation).
_WATCHED = tuple(var.name for var in (
    DISABLE_PLUGIN_AUTOLOAD, PLUGINS, STRICT_PLUGINS, DISABLE_SOLVERS, ALLOW_REDUCED_PRECISION,
    MAX_TOLERANCE, DETERMINISTIC, ERRATA, CHECK_NUMERICS, *FAMILY_SWITCHES.values()))
_WATCHED_KEYS = tuple(map(_key, _WATCHED))
_seen: list = [None, 0]   # the watched values last seen, the generation


def generation():
    """A counter that moves whenever one of the watched variables (_WATCHED) changed since the
    last call: plans compare it on every run rather than re-read what the variables imply.
    Changes made through os.environ (or monkeypatch) are seen; a C-level putenv is not."""
    state = tuple(map(_ENVIRON.get, _WATCHED_KEYS))
    if state != _seen[0]:
        _seen[0] = state
        _seen[1] += 1
    return _seen[1]


def configure_logging():
    """Set the 'convsolve' logger's level from CONVSOLVE_LOG_LEVEL, with a stderr handler.

    Without the variable nothing is changed (the application's logging set-up rules).
    """
    logger = logging.getLogger("convsolve")
    if not os.environ.get(LOG_LEVEL.name, "").strip():
        return
    level = logging.getLevelName(LOG_LEVEL.raw().upper())
    if not isinstance(level, int):
        logger.warning("ignoring %s=%r: not a logging level", LOG_LEVEL.name, LOG_LEVEL.raw())
        return
    logger.setLevel(level)
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("convsolve: %(levelname)s: %(message)s"))
        logger.addHandler(handler)
        logger.propagate = False

