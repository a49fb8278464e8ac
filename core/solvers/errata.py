"""Errata (cuDNN frontend's idea): JSON files of entries that exclude a solver where it is known to
fail, the package's own and CONVSOLVE_ERRATA's; docs/environment.md has the format.

A file is a JSON list of entries; each is an object with ``solver`` (an fnmatch glob on the
solver's name) and ``reason``, and optionally ``direction``, ``device`` (a case-insensitive glob
on the device's name), ``kernel``, ``stride``, ``dilation``, ``groups``, ``c``, ``k`` and ``key``
(a regex searched in the problem's key).  An entry excludes a solver where every field it has
matches.  Anything else in a file is an ErrataError naming the file, the entry and the field.
"""
import difflib
import fnmatch
import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from .. import env
from ..errors import ErrataError, ValidationError
from ..problem import Direction

SHIPPED = Path(__file__).with_name("errata.json")


def _count(value):
    return type(value) is int and value >= 1


def _pair(value):
    if _count(value):
        return (value, value)
    if isinstance(value, list) and len(value) == 2 and all(map(_count, value)):
        return tuple(value)
    raise ValueError("expected a positive integer or a pair [h, w] of them")


def _range(value):
    if _count(value):
        return (value, value)
    if isinstance(value, dict) and value and set(value) <= {"min", "max"} \
            and all(map(_count, value.values())):
        low, high = value.get("min", 1), value.get("max", math.inf)
        if low <= high:
            return (low, high)
    raise ValueError('expected a count, or {"min": a, "max": b} (either one may be left out) '
                     "with 1 <= a <= b")


def _text(value):
    if not isinstance(value, str) or not value.strip():
        raise ValueError("expected a non-empty string")
    return value.strip()


def _direction(value):
    try:
        return Direction.parse(value)
    except ValidationError:
        raise ValueError("expected forward, backward-data or backward-weights") from None


def _groups(value):
    if _count(value) or value == "depthwise":
        return value
    raise ValueError('expected a positive integer or "depthwise"')


def _regex(value):
    try:
        return re.compile(_text(value))
    except re.error as exc:
        raise ValueError(f"not a regular expression: {exc}") from None


#: Each field's parser: the JSON value to what Erratum.matches compares, or ValueError(why).
FIELDS = {"solver": _text, "reason": _text, "direction": _direction,
          "device": lambda v: _text(v).lower(), "kernel": _pair, "stride": _pair,
          "dilation": _pair, "groups": _groups, "c": _range, "k": _range, "key": _regex}
REQUIRED = ("solver", "reason")


@dataclass(frozen=True)
class Erratum:
    """One entry: where it is (``file#index``), why, and the fields it constrains."""

    where: str
    fields: dict

    def matches(self, solver_name, problem, device=None):
        """Whether it excludes ``solver_name`` for ``problem`` on the device called ``device``
        (None: unknown, so an entry with a ``device`` does not match)."""
        f, conv = self.fields, problem.conv
        actual = {"direction": problem.direction, "kernel": problem.fil_sizes,
                  "stride": conv.strides, "dilation": conv.dilations}
        groups = f.get("groups")
        return (fnmatch.fnmatchcase(solver_name, f["solver"])
                and all(f[name] == value for name, value in actual.items() if name in f)
                and ("device" not in f or device is not None
                     and fnmatch.fnmatchcase(device.strip().lower(), f["device"]))
                and (groups is None or groups == problem.groups
                     or groups == "depthwise" and problem.groups == problem.c)
                and all(f[name][0] <= getattr(problem, name) <= f[name][1]
                        for name in ("c", "k") if name in f)
                and ("key" not in f or f["key"].search(problem.key()) is not None))


def parse(path, text):
    """The entries of an errata file's ``text`` (``path`` names it in errors); ErrataError for
    anything malformed."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        lines = text.splitlines()
        line = lines[exc.lineno - 1].strip()[:80] if exc.lineno <= len(lines) else ""
        raise ErrataError(path, None, f"JSON at line {exc.lineno} column {exc.colno}", line,
                          exc.msg) from None
    if not isinstance(data, list):
        kind = "object" if isinstance(data, dict) else type(data).__name__
        raise ErrataError(path, None, "top level", kind, "expected a JSON list of entries")
    entries = []
    for index, entry in enumerate(data):
        if not isinstance(entry, dict):
            raise ErrataError(path, index, "entry", entry, "expected a JSON object")
        for name in entry:
            if name not in FIELDS:
                guess = difflib.get_close_matches(name, FIELDS, n=1)
                raise ErrataError(path, index, "field", name, "unknown field" + (
                    f" (did you mean {guess[0]!r}?)" if guess else f"; the fields are {[*FIELDS]}"))
        for name in REQUIRED:
            if name not in entry:
                raise ErrataError(path, index, name, None, "a required field is missing")
        fields = {}
        for name, value in entry.items():
            try:
                fields[name] = FIELDS[name](value)
            except ValueError as exc:
                raise ErrataError(path, index, name, value, str(exc)) from None
        entries.append(Erratum(f"{path}#{index}", fields))
    return tuple(entries)


_cache = {}   # path -> ((mtime_ns, size), entries)


def load(path, source):
    """The entries of the file at ``path``, parsed again only when its mtime or size changes;
    ``source`` (the variable that named it) is named when it cannot be read."""
    try:
        stat = os.stat(path)
        stamp = (stat.st_mtime_ns, stat.st_size)
        if path in _cache and _cache[path][0] == stamp:
            return _cache[path][1]
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValidationError(source, str(path), "cannot read the errata file: "
                              f"{getattr(exc, 'strerror', None) or exc}") from None
    entries = parse(str(path), text)
    _cache[path] = (stamp, entries)
    return entries


_active = [None, None, ()]   # the shipped file's entries, the user file's, both


def active():
    """The entries in force: the shipped file's, then CONVSOLVE_ERRATA's; the same tuple object
    while neither file changed (Registry.candidates keeps its answers while it is)."""
    user = load(env.ERRATA.raw(), env.ERRATA.name) if env.ERRATA.is_set() else ()
    shipped = load(str(SHIPPED), "the shipped errata file")
    if _active[0] is not shipped or _active[1] is not user:
        _active[:] = [shipped, user, shipped + user]
    return _active[2]


def exclusion(entries, solver_name, problem, device=None):
    """Why the first of ``entries`` that matches excludes the solver (naming the file and the
    entry), or None."""
    erratum = next((e for e in entries if e.matches(solver_name, problem, device)), None)
    return erratum and f"excluded by erratum {erratum.where}: {erratum.fields['reason']}"
