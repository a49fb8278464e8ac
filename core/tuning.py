"""Tunable solvers' data: configuration spaces, and parameter tables keyed by device class.

A *config* is a dict of named tunables (``{"TM": 6, "TN": 16}``) that a tunable solver's
``build_invoker(problem, handle, config)`` turns into ``-D`` defines.  Its ``config_space``
hook describes every config it accepts for a problem as data: a :class:`ConfigSpace` of
parameters, each with its candidate values, and constraints over them, written as Python
expressions over the parameter names (``"TM * TN <= 128"``), as Kernel Tuner and CLTune write
them.  Device limits (local memory, work-group size) are the ``check_config`` hook's.

Device classes follow CLBlast's database: a table of parameter sets is keyed by the most specific
description of a device it knows, and :func:`pick` falls back along :func:`device_keys` from the
exact device to its architecture, its ISA class (native float vector width: 16 for AVX-512, 8 for
AVX2), its vendor and its type, then ``"*"``.
"""
import json
import random
import re
from collections.abc import Iterable, Iterator, Mapping
from types import CodeType
from typing import TypeVar

import pyopencl as cl

from .errors import ValidationError

#: Names a constraint may call besides the parameters.
_CONSTRAINT_BUILTINS = {"min": min, "max": max, "abs": abs}

#: A tunable's value: an int, a float or an identifier (``handle.build`` takes them as defines).
ParamValue = int | float | str
#: A config: tunable name -> value.
Config = dict[str, ParamValue]
_T = TypeVar("_T")


class ConfigSpace:
    """The configs a tunable solver accepts for a problem: parameters and constraints as data.

    ``params`` maps each parameter's name to its candidate values, in the order a neighbourhood
    search steps through them (so list them sorted); ``constraints`` are expressions over the
    names that every config must satisfy.
    """

    def __init__(self, params: Mapping[str, Iterable[ParamValue]],
                 constraints: Iterable[str] = ()) -> None:
        if not params:
            raise ValidationError("params", params, "a config space needs at least one parameter")
        self.params = {name: tuple(values) for name, values in params.items()}
        for name, values in self.params.items():
            if not re.fullmatch(r"[A-Za-z_]\w*", name) or not values:
                raise ValidationError(f"params[{name!r}]", values,
                                      "needs an identifier for a name and at least one value")
        self.constraints = tuple(constraints)
        self._valid: list[Config] | None = None
        self._compiled: list[tuple[str, CodeType]] = []
        for text in self.constraints:
            try:
                self._compiled.append((text, compile(text, f"<constraint {text}>", "eval")))
            except SyntaxError as exc:
                raise ValidationError("constraints", text, f"is not an expression: {exc}") from exc

    def refusal(self, config: object) -> str | None:
        """Why ``config`` is not in the space (a parameter missing, unknown or off its list, a
        constraint false), or None when it is."""
        if not isinstance(config, dict):
            return f"{config!r} is not a dict of parameters"
        missing = [name for name in self.params if name not in config]
        unknown = [name for name in config if name not in self.params]
        if missing or unknown:
            return (f"parameters {missing} missing" if missing else "") + (
                "; " if missing and unknown else "") + (
                f"parameters {unknown} not in the space" if unknown else "")
        for name, values in self.params.items():
            if config[name] not in values:
                return f"{name}={config[name]!r} is not one of {list(values)}"
        for text, code in self._compiled:
            try:
                satisfied = _evaluate(code, config)
            except Exception as exc:  # noqa: BLE001 - a plugin's constraint, reported as such
                return f"constraint {text!r} raised {exc!r}"
            if not satisfied:
                return f"constraint {text!r} is false"
        return None

    def __contains__(self, config: object) -> bool:
        return self.refusal(config) is None

    def __iter__(self) -> Iterator[Config]:
        """Every config of the space, in the order of the parameters' value lists.  Each
        constraint is tested once the last parameter it names has a value, so a branch it
        refuses is never extended (implicit GEMM's space: 2 million products, 6 s to test one
        by one)."""
        names = list(self.params)
        checks: list[list[CodeType]] = [[] for _ in names]
        for _, code in self._compiled:
            named = [i for i, name in enumerate(names) if name in _names_in(code)]
            checks[max(named, default=0)].append(code)
        yield from self._extend({}, names, checks)

    def _extend(self, config: Config, names: list[str],
                checks: list[list[CodeType]]) -> Iterator[Config]:
        depth = len(config)
        if depth == len(names):
            yield dict(config)
            return
        for value in self.params[names[depth]]:
            config[names[depth]] = value
            if all(_holds(code, config) for code in checks[depth]):
                yield from self._extend(config, names, checks)
            del config[names[depth]]

    def size(self) -> int:
        """How many configs the parameters' product has (before the constraints)."""
        count = 1
        for values in self.params.values():
            count *= len(values)
        return count

    def sample(self, count: int, rng: random.Random | None = None) -> list[Config]:
        """Up to ``count`` distinct valid configs drawn at random (all of them when the space
        holds fewer); ``rng`` is a random.Random.  Draws at random from the parameters' product
        first; where the constraints reject most of it, the rest comes from the valid configs
        enumerated once (and kept)."""
        rng = rng or random.Random(0)
        if self.size() <= 4 * count:
            return rng.sample(self.valid(), min(count, len(self.valid())))
        seen, drawn = set(), []
        for _ in range(50 * count):
            config = {name: rng.choice(values) for name, values in self.params.items()}
            key = config_key(config)
            if key not in seen and self.refusal(config) is None:
                seen.add(key)
                drawn.append(config)
                if len(drawn) == count:
                    return drawn
        rest = [c for c in self.valid() if config_key(c) not in seen]
        return drawn + rng.sample(rest, min(count - len(drawn), len(rest)))

    def valid(self) -> list[Config]:
        """Every valid config, enumerated on first use and kept."""
        if self._valid is None:
            self._valid = list(self)
        return self._valid

    def neighbours(self, config: Mapping[str, ParamValue]) -> list[Config]:
        """The valid configs one step away from ``config``: one parameter moved to the next
        value before or after its own in the value list."""
        found = []
        for name, values in self.params.items():
            index = values.index(config[name])
            for step in (-1, 1):
                if 0 <= index + step < len(values):
                    moved = dict(config, **{name: values[index + step]})
                    if self.refusal(moved) is None:
                        found.append(moved)
        return found

    def __repr__(self) -> str:
        return f"ConfigSpace({self.params!r}, {list(self.constraints)!r})"


def _names_in(code: CodeType) -> set[str]:
    """The names ``code`` and the code nested in it (a generator expression's) read."""
    return set(code.co_names).union(*(_names_in(c) for c in code.co_consts
                                      if isinstance(c, CodeType)), code.co_freevars)


def _evaluate(code: CodeType, config: Mapping[str, ParamValue]) -> object:
    """A compiled constraint's value for ``config`` (its names; _CONSTRAINT_BUILTINS besides)."""
    return eval(code, {"__builtins__": _CONSTRAINT_BUILTINS}, dict(config))


def _holds(code: CodeType, config: Config) -> bool:
    """Whether a compiled constraint is true of ``config`` (one that raises is not)."""
    try:
        return bool(_evaluate(code, config))
    except Exception:  # noqa: BLE001 - a plugin's constraint; refusal() reports why
        return False


def config_key(config: Mapping[str, ParamValue] | None) -> str | None:
    """A config as canonical text (sorted JSON): its identity in the perf-db and in caches."""
    return None if config is None else json.dumps(config, sort_keys=True, separators=(",", ":"))


# {{{ device classes

def _architecture(device: cl.Device) -> str:
    """The device's architecture: PoCL's LLVM CPU name (``skylake-avx512``, ``haswell``,
    ``znver5``) from its version string, NVIDIA's ``sm_XY``, else the device name."""
    pocl = re.search(r"HSTR: \S*?-gnu-(\S+)", device.version)
    if pocl:
        return pocl.group(1)
    try:
        return f"sm_{device.compute_capability_major_nv}{device.compute_capability_minor_nv}"
    except (cl.LogicError, cl.RuntimeError, AttributeError):
        return device.name.strip()


def _type_name(device: cl.Device) -> str:
    if device.type & cl.device_type.GPU and not device.type & cl.device_type.CPU:
        return "gpu"
    return "cpu" if device.type & cl.device_type.CPU else "accelerator"


def device_keys(device: cl.Device) -> tuple[str, ...]:
    """The keys a device answers to in a parameter table, most specific first: its exact name,
    then ``type/architecture``, ``type/vectorN`` (native float vector width), ``type/vendor``,
    ``type`` and ``*``."""
    kind = _type_name(device)
    vendor = device.vendor.strip().split()[0].lower() if device.vendor.strip() else "unknown"
    return (device.name.strip(), f"{kind}/{_architecture(device)}",
            f"{kind}/vector{device.native_vector_width_float}", f"{kind}/{vendor}", kind, "*")


def pick(table: Mapping[str, _T], device: cl.Device) -> _T:
    """``table[key]`` for the first of ``device_keys(device)`` the table holds; KeyError naming
    the keys tried when none is there (give every table a ``"*"`` entry)."""
    for key in device_keys(device):
        if key in table:
            return table[key]
    raise KeyError(f"no entry for {device_keys(device)} in a table with keys {list(table)}")

# }}}
