"""The ranking's training data: measured solver times per problem, in memory and as a file.

The file is JSON lines, gzip-compressed or not: a header ``{"header": {"device": {...}, "date",
"command", "convsolve"}}`` (the device as DeviceFacts.from_dict reads it, plus ``name`` and
``keys``), then one ``{"problem": key, "times_ms": {solver: ms}, "failed": {solver: reason}}`` a
problem.  Times are medians of interleaved repeats; a failed or absent solver has no time.
Several collections of one corpus on one device, read together, become one record a problem
(Dataset.merged): each solver's label is then the geometric mean of repeated measurements, less
noisy than one collection's (BENCHMARKS.md measured that noise on the 2-core CPUs).
"""
from __future__ import annotations

import gzip
import json
import os
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import numpy as np

from ..errors import ModelError, ValidationError
from ..problem import Problem
from .features import DeviceFacts, problem_features
from .gbdt import finite_number


@dataclass(frozen=True)
class Record:
    """One problem's measurements: each timed solver's median time, each failure's reason."""

    problem: Problem
    times_ms: Mapping[str, float]
    failed: Mapping[str, str] = field(default_factory=dict)

    @property
    def best_ms(self) -> float:
        """The fastest time (inf when no solver has one)."""
        return min(self.times_ms.values(), default=float("inf"))


@dataclass(frozen=True)
class Dataset:
    """Records measured on one device, and the header they came with (device name, date...)."""

    device: DeviceFacts
    records: tuple[Record, ...]
    header: Mapping[str, object] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.records)

    def timed(self) -> Dataset:
        """The records with at least one time (the others teach nothing)."""
        return self.subset([i for i, r in enumerate(self.records) if r.times_ms])

    def subset(self, rows: Sequence[int] | np.ndarray) -> Dataset:
        """The records at ``rows`` (indices, or a boolean mask of len(self))."""
        rows = np.arange(len(self))[np.asarray(rows)] if len(rows) else []
        return Dataset(self.device, tuple(self.records[i] for i in rows), self.header)

    def features(self) -> np.ndarray:
        """The (records, features) matrix of problem_features on this device."""
        return np.array([problem_features(r.problem, self.device) for r in self.records],
                        dtype=np.float64).reshape(len(self), -1)

    def merged(self) -> Dataset:
        """One record per problem, in order of first appearance: the records of a problem
        (repeat collections) as one, each solver's time the geometric mean of its times there;
        a failure is kept only where no record of the problem timed that solver."""
        groups: dict[str, list[Record]] = {}
        for r in self.records:
            groups.setdefault(r.problem.key(), []).append(r)
        if len(groups) == len(self.records):
            return self
        return Dataset(self.device, tuple(_merge(group) for group in groups.values()),
                       self.header)

    def solvers(self) -> list[str]:
        """Every solver with a time in some record, sorted."""
        return sorted({name for r in self.records for name in r.times_ms})


def _merge(records: Sequence[Record]) -> Record:
    """``records`` of one problem as one (Dataset.merged)."""
    if len(records) == 1:
        return records[0]
    times: dict[str, list[float]] = {}
    for r in records:
        for name, ms in r.times_ms.items():
            times.setdefault(name, []).append(ms)
    failed = {name: reason for r in records for name, reason in r.failed.items()
              if name not in times}
    return Record(records[0].problem,
                  {name: float(np.exp(np.mean(np.log(ms)))) for name, ms in times.items()},
                  failed)


def _read_text(path: Path) -> IO[str]:
    """``path`` opened as text, through gzip when its first bytes are gzip's."""
    with open(path, "rb") as head:
        zipped = head.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rt", encoding="utf-8") if zipped else open(path, encoding="utf-8")


def _record(line: object, where: str) -> Record:
    """A Record from a parsed data line; ModelError naming ``where`` and the field."""
    if not isinstance(line, dict):
        raise ModelError(f"{where}: expected an object")
    try:
        problem = Problem.from_key(line["problem"])
    except (KeyError, TypeError, AttributeError, ValidationError) as exc:
        raise ModelError(f"{where}: no valid 'problem' key ({exc})") from None
    times, failed = line.get("times_ms", {}), line.get("failed", {})
    if not isinstance(times, dict) or not all(finite_number(t) and t > 0 for t in times.values()):
        raise ModelError(f"{where}: 'times_ms' must map solvers to positive finite times")
    if not isinstance(failed, dict):
        raise ModelError(f"{where}: 'failed' must map solvers to reasons")
    return Record(problem, {str(k): float(v) for k, v in times.items()},
                  {str(k): str(v) for k, v in failed.items()})


def read_dataset(path: str | os.PathLike[str]) -> Dataset:
    """The dataset of a data file; ModelError naming the file, the line and what is wrong."""
    path = Path(path)
    try:
        with _read_text(path) as stream:
            texts = [(f"{path}:{n}", text) for n, text in enumerate(stream, 1) if text.strip()]
    except (OSError, EOFError, UnicodeDecodeError, zlib.error) as exc:
        raise ModelError(f"{path}: cannot read the data file ({exc})", path) from None
    if not texts:
        raise ModelError(f"{path}: empty; expected a header line", path)
    lines = []
    for where, text in texts:
        try:
            lines.append((where, json.loads(text)))
        except json.JSONDecodeError as exc:
            raise ModelError(f"{where}: not JSON ({exc})", path) from None
    where, first = lines[0]
    if not isinstance(first, dict) or not isinstance(first.get("header"), dict):
        raise ModelError(f"{where}: the first line must be a 'header'", path)
    try:
        device = DeviceFacts.from_dict(first["header"].get("device"))
    except ValidationError as exc:
        raise ModelError(f"{where}: header: {exc}", path) from None
    try:
        records = tuple(_record(line, where) for where, line in lines[1:])
    except ModelError as exc:
        raise ModelError(str(exc), path) from None
    return Dataset(device, records, first["header"])


def write_dataset(dataset: Dataset, path: str | os.PathLike[str]) -> None:
    """``dataset`` as a data file (gzip when ``path`` ends in .gz), which read_dataset reads."""
    named = dataset.header.get("device")   # name and keys, beside the facts
    header = {**dataset.header, "device": {**(named if isinstance(named, Mapping) else {}),
                                            **dataset.device.to_dict()}}
    path = Path(path)
    with (gzip.open(path, "wt", encoding="utf-8") if path.suffix == ".gz"
          else open(path, "w", encoding="utf-8")) as stream:
        stream.write(json.dumps({"header": header}) + "\n")
        for r in dataset.records:
            stream.write(json.dumps({"problem": r.problem.key(), "times_ms": dict(r.times_ms),
                                     "failed": dict(r.failed)}) + "\n")
