"""The find-db: every benchmarked solver's time and workspace per device and problem.

Two layers.  The user db (SQLite, WAL) is written by find and lives under platformdirs' user data
dir; the system db (JSON lines, read-only, shipped in the package) answers for problems the user db
has not seen.  Every write is one transaction, so a crash or a concurrent writer never leaves half
a record, and a call waits at most ``_BUSY_TIMEOUT_S`` (3 s) for each lock another process holds.
A user db whose file or directory is read-only still answers reads.  One that is corrupt or
truncated is renamed to ``<name>.corrupt-<time>-<pid>`` and rebuilt empty, under an exclusive lock
on ``<name>.lock`` and only if it is still corrupt then.  Every failure is a ``DatabaseError``.
Solvers that failed to build or run are recorded too (with the reason), so that a later find knows
which solvers it has already tried.
"""
import contextlib
import errno
import json
import logging
import os
import sqlite3
import threading
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import platformdirs

try:
    import fcntl
except ImportError:   # not POSIX: set-asides are not serialised across processes
    fcntl = None

from . import env
from .errors import DatabaseError

log = logging.getLogger("convsolve")

SCHEMA_VERSION = 3
_TABLE = f"find_v{SCHEMA_VERSION}"
#: The previous schema (its column ``algorithm`` is now ``family``), migrated on first use.
_OLD_TABLE = "find_v2"
#: How long a call waits for another process's lock (SQLite's write lock, the sidecar lock)
#: before it raises DatabaseError: find then keeps its results unsaved rather than stall.
_BUSY_TIMEOUT_S = 3.0


@dataclass(frozen=True)
class Record:
    """One benchmarked solver for one problem on one device."""

    solver: str
    family: str
    time_ms: float         # None for a failure
    workspace: int
    source: str = "user"   # 'user' or 'system': which db it came from
    failure: str = None    # why find could not time it (failed to build or run), else None


def user_db_path():
    """Path of the user db: CONVSOLVE_USER_DB_PATH, else in platformdirs' user data dir."""
    override = env.USER_DB_PATH.raw()
    if override:
        return Path(override)
    return Path(platformdirs.user_data_dir("convsolve")) / f"find_db_v{SCHEMA_VERSION}.sqlite"


def system_db_path():
    """Path of the read-only system db: CONVSOLVE_SYSTEM_DB_PATH, else the packaged one."""
    override = env.SYSTEM_DB_PATH.raw()
    if override:
        return Path(override)
    return Path(str(resources.files("convsolve") / "system_db.jsonl"))


# {{{ system db

_system_cache = {}


def _system_records(path):
    """{(device, problem): [Record]} from a JSON-lines file; bad lines are logged and skipped, and
    a file that cannot be read is logged and answers nothing."""
    table, lines, stamp = {}, [], None
    try:
        stamp = path.stat().st_mtime_ns if path.exists() else None
        if _system_cache.get(path, (None,))[0] == stamp and stamp is not None:
            return _system_cache[path][1]
        if stamp is not None:
            lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as exc:   # warned once per version of the file
        log.warning("system find-db %s cannot be read (%s); it answers nothing", path, exc)
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            row = json.loads(line)
            failure = row.get("failure")
            record = Record(row["solver"], row["family"],
                            None if failure else float(row["time_ms"]),
                            int(row.get("workspace", 0)), "system", failure)
            table.setdefault((row["device"], row["problem"]), []).append(record)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("system find-db %s line %d skipped: %s", path, number, exc)
    _system_cache[path] = (stamp, table)
    return table

# }}}


def _has_table(conn, schema, table):
    return conn.execute(f"SELECT 1 FROM {schema}.sqlite_master WHERE type = 'table' AND name = ?",
                        (table,)).fetchone() is not None


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
    to _BUSY_TIMEOUT_S, then left to raise."""
    deadline, pause = time.monotonic() + _BUSY_TIMEOUT_S, 0.002
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


class FindDb:
    """The user db over the system db; open one per use, it holds no connection between calls.

    Every public method works or raises ``convsolve.DatabaseError``, whose first line names the
    file, what failed, why and what to do.
    """

    _checked = set()
    _check_lock = threading.Lock()

    def __init__(self, user_path=None, system_path=None):
        self.user_path = Path(user_path) if user_path else user_db_path()
        self.system_path = Path(system_path) if system_path else system_db_path()

    # {{{ sqlite plumbing

    @contextlib.contextmanager
    def _lock(self, exclusive):
        """Hold the sidecar ``<db>.lock`` (fcntl.flock): shared by every call, exclusive while a
        corrupt file is moved aside, so that no convsolve connection is open on it then.  A shared
        lock is skipped where the file cannot be made (a read-only directory: nothing moves there);
        an exclusive one then raises OSError, and waiting over _BUSY_TIMEOUT_S for either raises
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
                               timeout=_BUSY_TIMEOUT_S, isolation_level=None)
        try:
            if mode == "rwc":   # SQLite refuses at once, not after a wait, while another
                # connection is switching a new db to WAL: hence the retries
                _patiently(lambda: conn.execute("PRAGMA journal_mode = WAL"),
                           sqlite3.OperationalError, "locked")
                if not _has_table(conn, "main", _TABLE):
                    self._create(conn)
            elif not _has_table(conn, "main", _TABLE):
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
        """Create the table, copying the records of a schema-2 db (same file, or the default
        ``find_db_v2.sqlite`` beside this one) so that an upgrade loses nothing."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {_TABLE} (device TEXT NOT NULL, problem TEXT NOT NULL,"
                " solver TEXT NOT NULL, family TEXT NOT NULL, time_ms REAL,"
                " workspace INTEGER NOT NULL, failure TEXT, updated REAL NOT NULL,"
                " PRIMARY KEY (device, problem, solver))")
            old_file = self.user_path.with_name(f"find_db_v{SCHEMA_VERSION - 1}.sqlite")
            sources = [f"main.{_OLD_TABLE}"] if _has_table(conn, "main", _OLD_TABLE) else []
            if not sources and old_file.exists() and old_file != self.user_path:
                try:
                    conn.execute("ATTACH DATABASE ? AS old", (str(old_file),))
                    if _has_table(conn, "old", _OLD_TABLE):
                        sources.append(f"old.{_OLD_TABLE}")
                except sqlite3.DatabaseError as exc:   # its trouble is not this file's
                    log.warning("find-db: records of %s not copied: %s", old_file, exc)
            for source in sources:
                conn.execute(f"INSERT OR IGNORE INTO {_TABLE} SELECT * FROM {source}")
                log.info("find-db: records of %s copied into %s", source, self.user_path)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        finally:
            if conn.execute("SELECT 1 FROM pragma_database_list WHERE name = 'old'").fetchone():
                conn.execute("DETACH DATABASE old")

    def _still_corrupt(self):
        """Whether the file now at the path fails to open or its quick_check (a read-only look)."""
        if not self.user_path.exists():
            return False
        try:
            conn = sqlite3.connect(f"{self.user_path.absolute().as_uri()}?mode=ro", uri=True,
                                   timeout=_BUSY_TIMEOUT_S)
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
            log.warning("find-db %s is corrupt (%s) and cannot be moved aside: %s",
                        path, reason, exc)
            raise DatabaseError(
                f"find-db {path} is corrupt ({reason}) and cannot be moved aside ({exc}); move or "
                "delete it, or set CONVSOLVE_USER_DB_PATH to another file") from exc
        log.warning("find-db %s is corrupt (%s): moved to %s; rebuilding it empty",
                    path, reason, aside)
        with self._check_lock:
            self._checked.discard(path)
        return True

    def _error(self, exc, write):
        """The DatabaseError for a failed call: what failed, why, what to do, on one line."""
        path, what = self.user_path, "cannot write it" if write else "cannot read it"
        why = f"{type(exc).__name__}: {exc}" if isinstance(exc, OSError) else str(exc)
        if "locked" in str(exc) or isinstance(exc, BlockingIOError):
            return DatabaseError(
                f"find-db {path}: {what}: another process has held its write lock for over "
                f"{_BUSY_TIMEOUT_S:g} s ({why}); try again once that process is done")
        if write and (_refused(exc) and not os.access(_nearest_existing(path), os.W_OK)
                      or "readonly" in str(exc)):
            return DatabaseError(
                f"find-db {path} is read-only ({why}); {what}: make the file and its directory "
                "writable, or set CONVSOLVE_USER_DB_PATH to a writable file")
        return DatabaseError(
            f"find-db {path}: {what} ({why}); check the file and its directory, or set "
            "CONVSOLVE_USER_DB_PATH to another file")

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
                        f"find-db {self.user_path} is corrupt ({exc}) and was not rebuilt; move "
                        "or delete it, or set CONVSOLVE_USER_DB_PATH to another file") from exc
                self._set_aside(exc)   # moved, or found rebuilt by another process: try again
        raise AssertionError("unreachable")

    # }}}

    def lookup(self, device, problem_key):
        """The records for a problem on a device, fastest first and failures last: the user db's,
        else the system db's."""
        rows = self._run(lambda conn: conn.execute(
            f"SELECT solver, family, time_ms, workspace, failure FROM {_TABLE}"
            " WHERE device = ? AND problem = ? ORDER BY failure IS NOT NULL, time_ms",
            (device, problem_key)).fetchall(), write=False, empty=[])
        if rows:
            return [Record(solver, family, time_ms, workspace, "user", failure)
                    for solver, family, time_ms, workspace, failure in rows]
        return self._system_lookup(device, problem_key)

    def _system_lookup(self, device, problem_key):
        system = _system_records(self.system_path).get((device, problem_key), [])
        return sorted(system, key=lambda r: (r.failure is not None, r.time_ms or 0.0))

    def records(self, device, problem_key):
        """lookup() for find, run and immediate mode: a user db that cannot be read is warned
        about and counts as empty (the system db still answers), never costing a result."""
        try:
            return self.lookup(device, problem_key)
        except DatabaseError as exc:
            log.warning("%s; its records are not used", exc)
            return self._system_lookup(device, problem_key)

    def keep(self, device, problem_key, records):
        """store() for find: True when stored; a db that cannot be written is warned about and
        find still returns what it measured."""
        try:
            self.store(device, problem_key, records)
            return True
        except DatabaseError as exc:
            log.warning("%s; this find's results were not recorded", exc)
            return False

    def store(self, device, problem_key, records):
        """Replace the user db's records for a problem with ``records``, in one transaction."""
        now = time.time()

        def write(conn):
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute(f"DELETE FROM {_TABLE} WHERE device = ? AND problem = ?",
                             (device, problem_key))
                conn.executemany(
                    f"INSERT INTO {_TABLE} VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [(device, problem_key, r.solver, r.family, r.time_ms, r.workspace,
                      r.failure, now) for r in records])
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        self._run(write, write=True)

    def rows(self):
        """Every user-db row as a dict, grouped by device and problem."""
        def read(conn):
            cursor = conn.execute(
                f"SELECT device, problem, solver, family, time_ms, workspace, failure"
                f" FROM {_TABLE} ORDER BY device, problem, failure IS NOT NULL, time_ms")
            names = [column[0] for column in cursor.description]
            return [dict(zip(names, row)) for row in cursor.fetchall()]
        return self._run(read, write=False, empty=[])

    def clear(self):
        """Delete every user-db record; returns how many there were."""
        return self._run(lambda conn: conn.execute(f"DELETE FROM {_TABLE}").rowcount,
                         write=not self._absent(), empty=0)

    def _absent(self):
        """Whether there is no db file (so clearing it has nothing to do, even where read-only)."""
        try:
            return not self.user_path.exists()
        except OSError:
            return False
