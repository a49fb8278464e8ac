"""What the dbs share: one table in a user SQLite file, and the JSON-lines format of system dbs.

``SqliteDb`` is one table in one file (WAL), open per call, never holding a connection between
calls (but the memo's read-only one, below).  Every write is one transaction, so a crash or a concurrent writer never leaves half a
record, and a call waits at most ``BUSY_TIMEOUT_S`` (3 s) for each lock another process holds.
A db whose file or directory is read-only still answers reads.  One that is corrupt or truncated
is renamed to ``<name>.corrupt-<time>-<pid>`` and rebuilt empty, under an exclusive lock on
``<name>.lock`` and only if it is still corrupt then.  Every failure is a ``DatabaseError`` whose
one line names the file, what failed, why and what to do.  A subclass's reads go through the
process's memo (memo.py: a repeated read is a dictionary lookup while no one commits to the
file, seen by ``PRAGMA data_version`` on the one read-only connection the memo keeps per file);
a write drops this process's memo of its file and checkpoints after its commit, so that the
WAL the memo's connection keeps never hides a record from an immutable reader.

The JSON-lines format: an optional header line ``{"format": "convsolve-db", "version": 1}``, then
one JSON object per line, ``"db": "find"`` (the default) or ``"perf"``, with device, problem,
solver and the record's fields; ``#`` comments and blank lines are skipped.
"""
import contextlib
import errno
import json
import logging
import math
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import ClassVar

try:
    import fcntl
except ImportError:   # not POSIX: set-asides are not serialised across processes
    fcntl = None

from ..errors import DatabaseError
from . import memo

log = logging.getLogger("convsolve")

#: How long a call waits for another process's lock (SQLite's write lock, the sidecar lock)
#: before it raises DatabaseError: find then keeps its results unsaved rather than stall.
BUSY_TIMEOUT_S = 3.0


def has_table(conn, schema, table):
    return conn.execute(f"SELECT 1 FROM {schema}.sqlite_master WHERE type = 'table' AND name = ?",
                        (table,)).fetchone() is not None


def transaction(conn, body):
    """``body()`` between BEGIN IMMEDIATE and COMMIT, rolled back if it raises; its result."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = body()
        conn.execute("COMMIT")
        return result
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _is_corrupt(exc):
    """Whether a sqlite3 error says the file itself is damaged (not busy, read-only, missing...)."""
    return (type(exc) is sqlite3.DatabaseError
            or any(word in str(exc) for word in ("not a database", "malformed")))


def _refused(exc):
    """Whether an error is the OS or SQLite refusing to write (or create) a file."""
    return (isinstance(exc, PermissionError) or getattr(exc, "errno", None) == errno.EROFS
            or any(word in str(exc) for word in ("readonly", "unable to open")))


def _patiently(attempt, busy, words=""):
    """``attempt()``, tried again while it raises ``busy`` (with ``words`` in its message) for up
    to BUSY_TIMEOUT_S, then left to raise."""
    deadline, pause = time.monotonic() + BUSY_TIMEOUT_S, 0.002
    while True:
        try:
            return attempt()
        except busy as exc:
            if words not in str(exc) or time.monotonic() > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def _nearest_existing(path):
    """``path``, or its nearest ancestor that exists."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


class SqliteDb:
    """One table of a user db file; a subclass names it with the class attributes below."""

    name = "db"       # in messages: 'find-db', 'perf-db'
    table = ""        # the table's name, with its schema version
    schema = ""       # its CREATE TABLE IF NOT EXISTS statement, with an 'updated' column
    key = ()          # its primary key's columns
    order = ""        # rows()'s ORDER BY
    path_var = None   # the env.Var that names the file (messages tell the user to set it)

    _checked: ClassVar[set] = set()   # paths whose quick_check passed in this process
    _check_lock = threading.Lock()

    def __init__(self, user_path):
        self.user_path = user_path if isinstance(user_path, Path) else Path(user_path)

    # {{{ sqlite plumbing

    @contextlib.contextmanager
    def _lock(self, exclusive):
        """Hold the sidecar ``<db>.lock`` (fcntl.flock): shared by every call, exclusive while a
        corrupt file is moved aside, so that no convsolve connection is open on it then.  A shared
        lock is skipped where the file cannot be made (a read-only directory: nothing moves there);
        an exclusive one then raises OSError, and waiting over BUSY_TIMEOUT_S for either raises
        BlockingIOError."""
        lock_path = f"{self.user_path}.lock"
        if self.user_path.is_dir():   # not a db at all; no lock file beside that directory
            yield
            return
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            if exclusive:
                raise
            try:
                fd = os.open(lock_path, os.O_RDONLY)   # flock needs no write access
            except OSError:
                fd = None
        if fd is None or fcntl is None:
            yield
            return
        try:
            flags = (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB
            _patiently(lambda: fcntl.flock(fd, flags), BlockingIOError)
            yield
        finally:
            os.close(fd)   # releases the lock

    def _open(self, mode):
        """A connection in SQLite URI ``mode``; None when a read-only one finds no table yet."""
        conn = sqlite3.connect(f"{self.user_path.absolute().as_uri()}?mode={mode}", uri=True,
                               timeout=BUSY_TIMEOUT_S, isolation_level=None)
        try:
            if mode == "rwc":   # SQLite refuses at once, not after a wait, while another
                # connection is switching a new db to WAL: hence the retries
                _patiently(lambda: conn.execute("PRAGMA journal_mode = WAL"),
                           sqlite3.OperationalError, "locked")
                if not has_table(conn, "main", self.table):
                    self._create(conn)
            elif not has_table(conn, "main", self.table):
                conn.close()
                return None
            with self._check_lock:
                if self.user_path not in self._checked:
                    verdict = conn.execute("PRAGMA quick_check").fetchone()[0]
                    if verdict != "ok":
                        raise sqlite3.DatabaseError(f"quick_check: {verdict}")
                    self._checked.add(self.user_path)
        except BaseException:
            conn.close()
            raise
        return conn

    def _connect(self, write):
        """A connection, or None for a read where no db exists and none can be made.

        A read falls back to a read-only connection, then to an immutable one (the file as of its
        last checkpoint), when the file or its directory cannot be written."""
        existing = _nearest_existing(self.user_path)
        if existing != self.user_path:   # no db file yet
            if not existing.is_dir():
                raise NotADirectoryError(f"{existing} is a file, not a directory")
            if not write and not os.access(existing, os.W_OK):
                return None
            self.user_path.parent.mkdir(parents=True, exist_ok=True)
        modes = ("rwc",) if write else ("rwc", "ro", "ro&immutable=1")
        for mode in modes:
            try:
                return self._open(mode)
            except sqlite3.Error as exc:
                if mode == modes[-1] or _is_corrupt(exc) or not _refused(exc):
                    raise
        raise AssertionError("unreachable")

    def _create(self, conn):
        """Create the table (a subclass may also copy an older schema's records)."""
        transaction(conn, lambda: conn.execute(self.schema))

    def _still_corrupt(self):
        """Whether the file now at the path fails to open or its quick_check (a read-only look)."""
        if not self.user_path.exists():
            return False
        try:
            conn = sqlite3.connect(f"{self.user_path.absolute().as_uri()}?mode=ro", uri=True,
                                   timeout=BUSY_TIMEOUT_S)
            try:
                return conn.execute("PRAGMA quick_check").fetchone()[0] != "ok"
            finally:
                conn.close()
        except sqlite3.Error as exc:
            return _is_corrupt(exc)

    def _set_aside(self, reason):
        """Move a corrupt user db (with its -wal and -shm) aside so that it is rebuilt; whether it
        moved.  Under the exclusive lock, the file is checked again first: another process may
        have moved it and rebuilt a healthy one since this one found it corrupt."""
        path = self.user_path
        aside = path.with_name(
            f"{path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
        try:
            with self._lock(exclusive=True):
                if not self._still_corrupt():
                    return False
                for suffix in ("-wal", "-shm", ""):   # the db last: killed midway, it stays corrupt
                    with contextlib.suppress(FileNotFoundError):
                        os.replace(f"{path}{suffix}", f"{aside}{suffix}")
        except OSError as exc:
            log.warning("%s %s is corrupt (%s) and cannot be moved aside: %s",
                        self.name, path, reason, exc)
            raise DatabaseError(
                f"{self.name} {path} is corrupt ({reason}) and cannot be moved aside ({exc}); "
                f"move or delete it, or set {self.path_var.name} to another file") from exc
        log.warning("%s %s is corrupt (%s): moved to %s; rebuilding it empty",
                    self.name, path, reason, aside)
        with self._check_lock:
            self._checked.discard(path)
        memo.forget(path)
        return True

    def _error(self, exc, write):
        """The DatabaseError for a failed call: what failed, why, what to do, on one line."""
        path, what = self.user_path, "cannot write it" if write else "cannot read it"
        why = f"{type(exc).__name__}: {exc}" if isinstance(exc, OSError) else str(exc)
        if "locked" in str(exc) or isinstance(exc, BlockingIOError):
            return DatabaseError(
                f"{self.name} {path}: {what}: another process has held its write lock for over "
                f"{BUSY_TIMEOUT_S:g} s ({why}); try again once that process is done")
        if write and (_refused(exc) and not os.access(_nearest_existing(path), os.W_OK)
                      or "readonly" in str(exc)):
            return DatabaseError(
                f"{self.name} {path} is read-only ({why}); {what}: make the file and its "
                f"directory writable, or set {self.path_var.name} to a writable file")
        return DatabaseError(
            f"{self.name} {path}: {what} ({why}); check the file and its directory, or set "
            f"{self.path_var.name} to another file")

    def _run(self, action, write, empty=None):
        """``action(conn)`` under the shared lock (``empty`` where there is no db to read); a
        corrupt file is set aside and the call retried once; any failure is a DatabaseError."""
        for attempt in (1, 2):
            try:
                with self._lock(exclusive=False):
                    conn = self._connect(write)
                    if conn is None:
                        return empty
                    try:
                        return action(conn)
                    finally:
                        conn.close()
            except (sqlite3.Error, OSError) as exc:
                if not _is_corrupt(exc):
                    raise self._error(exc, write) from exc
                if attempt == 2:
                    raise DatabaseError(
                        f"{self.name} {self.user_path} is corrupt ({exc}) and was not rebuilt; "
                        f"move or delete it, or set {self.path_var.name} to another file") from exc
                self._set_aside(exc)   # moved, or found rebuilt by another process: try again
        raise AssertionError("unreachable")

    def _write(self, body, write=True, empty=None):
        """``body(conn)`` in one transaction on a writable connection (not ``write``: clear() of
        a missing file, ``empty`` where none can be made), then a passive checkpoint; its result.
        Drops this process's memo of the file after, whatever happened."""
        def committed(conn):
            result = transaction(conn, lambda: body(conn))
            with contextlib.suppress(sqlite3.Error):   # committed: a later one copies it
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            return result
        try:
            return self._run(committed, write, empty)
        finally:
            memo.forget(self.user_path)

    def _read(self, key, action):
        """``action(conn)``'s answer to a read (immutable, e.g. a tuple of tuples or of frozen
        records: the memo hands out the same object each time), from this process's memo while
        the file is unchanged; ``()`` where there is no db."""
        return memo.read(self.user_path, (self.table, *key),
                         lambda: self._run(action, write=False, empty=()))

    # }}}

    def _upsert(self, rows, only_faster, then=None):
        """Insert ``rows`` (dicts of the table's columns but 'updated') in one transaction, each
        replacing the record with its key, unless ``only_faster`` and that record is a measurement
        at least as fast (a measurement replaces a failure); how many rows were written.
        ``then()`` runs inside the transaction, after the rows (not at all without rows): if it
        raises, none is written."""
        if not rows:
            return 0
        columns, table = [*rows[0], "updated"], self.table
        update = ", ".join(f"{c} = excluded.{c}" for c in columns if c not in self.key)
        faster = (f" WHERE excluded.failure IS NULL AND ({table}.failure IS NOT NULL OR"
                  f" {table}.time_ms IS NULL OR excluded.time_ms < {table}.time_ms)")
        sql = (f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
               f" ON CONFLICT ({', '.join(self.key)}) DO UPDATE SET {update}"
               + (faster if only_faster else ""))
        now = time.time()
        values = [(*(row[c] for c in columns[:-1]), now) for row in rows]

        def body(conn):
            written = conn.executemany(sql, values).rowcount
            if then is not None:
                then()
            return written
        return self._write(body)

    def merge(self, rows, then=None):
        """Add ``rows`` (dicts of the table's columns but 'updated', e.g. imported ones) in one
        transaction, never replacing a record that is as fast or faster; how many were written.
        ``then()`` (another db's merge) runs before that transaction commits: if it raises, this
        db stays as it was.  Without rows, nothing runs."""
        return self._upsert(rows, only_faster=True, then=then)

    def rows(self):
        """Every record of the user db as a dict of its columns (but 'updated'), in rows() order."""
        def read(conn):
            cursor = conn.execute(f"SELECT * FROM {self.table} ORDER BY {self.order}")
            names = [column[0] for column in cursor.description]
            return [{n: v for n, v in zip(names, row) if n != "updated"}
                    for row in cursor.fetchall()]
        return self._run(read, write=False, empty=[])

    def forget(self, device, problem_key):
        """Delete the user db's records of a problem on a device (MIOpen's DB_CLEAN); how many."""
        return self._write(lambda conn: conn.execute(
            f"DELETE FROM {self.table} WHERE device = ? AND problem = ?",
            (device, problem_key)).rowcount)

    def clear(self):
        """Delete every user-db record; returns how many there were."""
        return self._write(lambda conn: conn.execute(f"DELETE FROM {self.table}").rowcount,
                           write=not self._absent(), empty=0)

    def _absent(self):
        """Whether there is no db file (so clearing it has nothing to do, even where read-only)."""
        try:
            return not self.user_path.exists()
        except OSError:
            return False


# {{{ JSON lines: system dbs and exports

FORMAT, FORMAT_VERSION = "convsolve-db", 1
KINDS = ("find", "perf")
#: What a bad record line raises while it is read (RecursionError: JSON nested too deeply).
LINE_ERRORS = (ValueError, KeyError, TypeError, AttributeError, RecursionError)


def header():
    """The first line of an export: the format's name and version."""
    return json.dumps({"format": FORMAT, "version": FORMAT_VERSION})


def db_lines(lines, where, parsers):
    """(line number, kind, item) for each record line of a JSON-lines db whose kind (its "db",
    "find" when absent) ``parsers`` has: item is ``parsers[kind](row)``, or for a bad line the
    exception that says why (kind then None).  Lines of the other kind are passed over.  A header
    of another format or a newer version raises DatabaseError naming ``where``."""
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        try:
            row = json.loads(text)
            if not isinstance(row, dict):
                raise TypeError(f"{text[:40]!r} is not a JSON object")
            if "format" in row:
                _check_header(row, where, number)
                continue
            kind = row.get("db", "find")
            if kind not in KINDS:
                raise ValueError(f"'db' is {kind!r}, not one of {', '.join(KINDS)}")
            if kind in parsers:
                yield number, kind, parsers[kind](row)
        except LINE_ERRORS as exc:
            yield number, None, exc


def _check_header(row, where, number):
    version = row.get("version")
    if row["format"] != FORMAT or not isinstance(version, int):
        raise DatabaseError(f"{where} line {number}: {row!r} is not a {FORMAT} header")
    if version > FORMAT_VERSION:
        raise DatabaseError(
            f"{where} is in {FORMAT} format version {version}, newer than this convsolve reads "
            f"({FORMAT_VERSION}); upgrade convsolve to read it")


def line_names(row):
    """(device, problem, solver) of a record line, each a non-empty string."""
    names = tuple(row[field] for field in ("device", "problem", "solver"))
    if not all(isinstance(name, str) and name for name in names):
        raise ValueError(f"device, problem and solver must be non-empty strings, not {names}")
    return names


def line_outcome(row):
    """(time_ms, failure) of a record line: a failure's reason and no time, else its time in ms
    (a finite number >= 0)."""
    if row.get("failure"):
        return None, str(row["failure"])
    try:
        time_ms = float(row["time_ms"])
    except (TypeError, ValueError):
        time_ms = math.nan
    if not 0 <= time_ms < math.inf:
        raise ValueError(f"time_ms {row['time_ms']!r} is not a time in ms, and no failure is given")
    return time_ms, None


_system_cache = {}


def system_table(path, kind, parse, name):
    """{key: [item]} of a read-only system db in JSON lines (``name`` in messages, e.g. 'system
    find-db'): each line of ``kind`` made (key, item) by ``parse``.  Bad lines are logged and
    skipped; a file that cannot be read, or is of a newer format, is logged and answers nothing.
    The file is read again only when it changes."""
    table, lines, stamp = {}, [], None
    try:
        stamp = path.stat().st_mtime_ns if path.exists() else None
        cached = _system_cache.get((path, kind))
        if cached and cached[0] == stamp and stamp is not None:
            return cached[1]
        if stamp is not None:
            lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as exc:   # warned once per version of the file
        log.warning("%s %s cannot be read (%s); it answers nothing", name, path, exc)
    try:
        for number, line_kind, item in db_lines(lines, f"{name} {path}", {kind: parse}):
            if line_kind is None:
                log.warning("%s %s line %d skipped: %s", name, path, number, item)
            else:
                table.setdefault(item[0], []).append(item[1])
    except DatabaseError as exc:
        log.warning("%s; it answers nothing", exc)
        table = {}
    _system_cache[(path, kind)] = (stamp, table)
    return table

# }}}
