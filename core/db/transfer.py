"""`convsolve db export / import`: the user find-db and perf-db as one versioned JSON-lines file.

The file is sqlite_db's JSON-lines format (a header line, then one record a line with "db":
"find" or "perf"), the format of the shipped system db too, so an export can be shipped as a
system db as is.  Import merges per record and never replaces a local record that is as fast or
faster (a measurement replaces a local failure), so importing twice changes nothing.  Import
(and `db merge`, several files in turn) also reads a user db file of another machine (SQLite),
without writing to it; ``merge_rows`` merges records a scale job gave back (core/scale/).
"""
import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import DatabaseError
from . import find_db, perf_db
from .store import KINDS, db_lines, has_table, header

#: Each kind's db, the parser of its lines, and the words for its records.
_KINDS = {"find": (find_db.FindDb, find_db.line_row, "find-db record"),
          "perf": (perf_db.PerfDb, perf_db.line_row, "perf-db trial")}
#: The longest line import reads: a record takes a few hundred bytes, a failure's reason with a
#: build log some KiB; a longer line is refused (it was stored, then printed by db show).
MAX_LINE_BYTES = 1 << 20


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
    """Merge an export's (or an SQLite user db file's) records into the user dbs, all or nothing
    (``_merge``). Records of a device other than ``device`` (a ``Handle.db_key``; None accepts
    every device) are refused; bad lines are skipped (``_read``, ``_checked``,
    sqlite_db.db_lines say why); a file of a newer format version raises DatabaseError, as does
    a db that cannot be written. Records of solvers that are not installed are imported: find-db
    lookups skip them until they are."""
    report = ImportReport(str(path), device)
    lines = _sqlite_lines(path) if _is_sqlite(path) else _read(path, report)
    return _import(lines, report)


def merge_rows(rows, device=None):
    """Merge export-format rows (dicts with their "db") into the user dbs, as import_file merges
    a file's lines: the ImportReport."""
    return _import([json.dumps(row) for row in rows], ImportReport("records", device))


def _import(lines, report):
    """Merge the JSON ``lines`` of an export into the user dbs, filling ``report``."""
    device, rows = report.device, {kind: [] for kind in _KINDS}
    parsers = {kind: _checked(parse) for kind, (_, parse, _) in _KINDS.items()}
    for number, kind, row in db_lines(lines, report.path, parsers):
        if kind is None:
            report.bad.append((number, f"no {row} field" if isinstance(row, KeyError) else row))
        elif device is not None and row["device"] != device:
            report.refused[row["device"]] = report.refused.get(row["device"], 0) + 1
        else:
            rows[kind].append(row)
    report.bad.sort()
    written = _merge(rows, [kind for kind in _KINDS if rows[kind]])
    for kind in _KINDS:
        report.imported[kind] = written.get(kind, 0)
        report.kept[kind] = len(rows[kind]) - report.imported[kind]
    return report


def _is_sqlite(path):
    """Whether ``path`` is an SQLite file (a user db copied from another machine)."""
    try:
        with open(path, "rb") as file:
            return file.read(16) == b"SQLite format 3\0"
    except OSError:
        return False


def _sqlite_lines(path):
    """Export lines of the find-db and perf-db tables in an SQLite file, read without writing
    to it; DatabaseError when it cannot be read."""
    lines = []
    try:
        conn = sqlite3.connect(f"{Path(path).absolute().as_uri()}?mode=ro", uri=True)
        try:
            for kind, (db, _, _) in _KINDS.items():
                if has_table(conn, "main", db.table):
                    cursor = conn.execute(f"SELECT * FROM {db.table} ORDER BY {db.order}")
                    names = [column[0] for column in cursor.description]
                    for values in cursor:
                        row = {n: v for n, v in zip(names, values) if n != "updated"}
                        if kind == "perf":
                            row["config"] = json.loads(row["config"])
                        lines.append(json.dumps({"db": kind, **row}))
        finally:
            conn.close()
    except (sqlite3.Error, ValueError) as exc:
        raise DatabaseError(f"cannot read the db {path} ({exc}); check the file") from exc
    return lines


def _read(path, report):
    """The file's lines as text, a line longer than MAX_LINE_BYTES or not UTF-8 left blank (its
    number and why in ``report.bad``); DatabaseError when the file cannot be read."""
    try:
        raws = Path(path).read_bytes().split(b"\n")
    except OSError as exc:
        raise DatabaseError(f"cannot read {path} ({exc}); check the file's name") from exc
    lines = []
    for number, raw in enumerate(raws, 1):
        why = f"longer than {MAX_LINE_BYTES} bytes" if len(raw) > MAX_LINE_BYTES else None
        try:
            lines.append("" if why else raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            lines.append("")
            why = f"not UTF-8 text ({exc})"
        if why:
            report.bad.append((number, why))
    return lines


def _checked(parse):
    """``parse`` of a record line, after refusing what it would store or raise OverflowError on:
    a NUL character, a workspace that is not a byte count (SQLite's INTEGER), a time_ms of an
    integer no float holds."""
    def check(row):
        nul = [key for key, value in row.items() if "\0" in key or "\\u0000" in json.dumps(value)]
        workspace, time_ms = row.get("workspace", 0), row.get("time_ms")
        if nul:
            raise ValueError(f"field {nul[0]!r} holds a NUL character")
        if type(workspace) is not int or not 0 <= workspace < 2 ** 63:
            raise ValueError(f"workspace {workspace!r} is not a byte count (0 to 2**63 - 1)")
        if type(time_ms) is int and time_ms.bit_length() > 1000:
            raise ValueError("time_ms is larger than any float: not a time in ms")
        return parse(row)
    return check


def _merge(rows, kinds):
    """{kind: records written} of merging ``rows[kind]`` into each of ``kinds``' dbs, each db's
    transaction open until the next one's has committed: a failure leaves every db as it was
    (but where the first db's own commit fails after the others': those keep the import)."""
    written = {}
    if kinds:
        written[kinds[0]] = _KINDS[kinds[0]][0]().merge(
            rows[kinds[0]], then=lambda: written.update(_merge(rows, kinds[1:])))
    return written
