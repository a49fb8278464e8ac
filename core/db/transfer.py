"""`convsolve db export / import`: the user find-db and perf-db as one versioned JSON-lines file.

The file is sqlite_db's JSON-lines format (a header line, then one record a line with "db":
"find" or "perf"), the format of the shipped system db too, so an export can be shipped as a
system db as is.  Import merges per record and never replaces a local record that is as fast or
faster (a measurement replaces a local failure), so importing twice changes nothing.
"""
import json
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import DatabaseError
from . import find_db, perf_db
from .store import KINDS, db_lines, header

#: Each kind's db, the parser of its lines, and the words for its records.
_KINDS = {"find": (find_db.FindDb, find_db.line_row, "find-db record"),
          "perf": (perf_db.PerfDb, perf_db.line_row, "perf-db trial")}


def counted(counts):
    """'3 find-db records, 1 perf-db trial' from {kind: count}; 'nothing' when all are 0."""
    words = [f"{n} {_KINDS[kind][2]}{'s' if n != 1 else ''}" for kind, n in counts.items() if n]
    return ", ".join(words) or "nothing"


def export(path, kinds=KINDS, device=None):
    """Write the user dbs' records of ``kinds`` to ``path`` (those of devices whose key contains
    ``device``, in any case, when given); {kind: how many}.  DatabaseError when a db cannot be
    read or the file cannot be written."""
    lines, counts = [header()], {}
    for kind in kinds:
        rows = [row for row in _KINDS[kind][0]().rows()
                if not device or device.lower() in row["device"].lower()]
        lines += [json.dumps({"db": kind, **row}) for row in rows]
        counts[kind] = len(rows)
    try:
        Path(path).write_text("\n".join(lines) + "\n")
    except OSError as exc:
        raise DatabaseError(f"cannot write the export {path} ({exc}); choose another file") from exc
    return counts


@dataclass
class ImportReport:
    """What an import did: per kind, records written and records kept local (as fast or faster);
    records refused as another device's ({device: count}); bad lines [(number, why)]."""

    path: str
    device: str = None   # this machine's device key; None under --force
    imported: dict = field(default_factory=dict)
    kept: dict = field(default_factory=dict)
    refused: dict = field(default_factory=dict)
    bad: list = field(default_factory=list)

    @property
    def code(self):
        """Exit code: 1 when a line was bad, or when every record was another device's."""
        matched = sum(self.imported.values()) + sum(self.kept.values())
        return 1 if self.bad or (self.refused and not matched) else 0

    def text(self):
        """The report as lines for the command: imported, kept, refused (and why), bad lines."""
        lines = [f"imported from {self.path}: {counted(self.imported)}"]
        if any(self.kept.values()):
            lines.append(f"kept the local record, as fast or faster: {counted(self.kept)}")
        for device, count in self.refused.items():
            lines.append(f"refused {count} record{'s' if count != 1 else ''} of device "
                         f"{device!r}: this machine's device is {self.device!r} (--force "
                         "imports them, under their own device)")
        lines += [f"{self.path} line {number} skipped: {why}" for number, why in self.bad]
        return "\n".join(lines)


def import_file(path, device=None):
    """Merge an export's records into the user dbs, one transaction per db.  Records of a device
    other than ``device`` (a ``Handle.db_key``; None accepts every device) are refused; bad lines
    are skipped; a file of a newer format version raises DatabaseError, as does a db that cannot
    be written."""
    try:
        lines = Path(path).read_text().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise DatabaseError(f"cannot read {path} ({exc}); check the file's name") from exc
    report = ImportReport(str(path), device)
    rows = {kind: [] for kind in _KINDS}
    parsers = {kind: parse for kind, (_, parse, _) in _KINDS.items()}
    for number, kind, row in db_lines(lines, str(path), parsers):
        if kind is None:
            report.bad.append((number, f"no {row} field" if isinstance(row, KeyError) else row))
        elif device is not None and row["device"] != device:
            report.refused[row["device"]] = report.refused.get(row["device"], 0) + 1
        else:
            rows[kind].append(row)
    for kind, (db, _, _) in _KINDS.items():
        report.imported[kind] = db().merge(rows[kind])
        report.kept[kind] = len(rows[kind]) - report.imported[kind]
    return report
