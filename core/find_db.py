"""The find-db: every benchmarked solver's time and workspace per device and problem.

Two layers.  The user db (SQLite, WAL, busy timeout) is written by find and lives under
platformdirs' user data dir; the system db (JSON lines, read-only, shipped in the package) answers
for problems the user db has not seen.  A user db file that is corrupt or truncated is reported,
renamed to ``<name>.corrupt-<time>-<pid>`` and rebuilt empty; every write is one transaction, so a
crash or a concurrent writer never leaves half a record.  Solvers that failed to build or run are
recorded too (with the reason), so that a later find knows which solvers it has already tried.
"""
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

from . import env
from .errors import DatabaseError

log = logging.getLogger("convsolve")

SCHEMA_VERSION = 3
_TABLE = f"find_v{SCHEMA_VERSION}"
#: The previous schema (its column ``algorithm`` is now ``family``), migrated on first use.
_OLD_TABLE = "find_v2"
_BUSY_TIMEOUT_S = 30.0


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
    return Path(override) if override else Path(str(resources.files("convsolve") / "system_db.jsonl"))


# {{{ system db

_system_cache = {}


def _system_records(path):
    """{(device, problem): [Record]} from a JSON-lines file; bad lines are logged and skipped."""
    stamp = path.stat().st_mtime_ns if path.exists() else None
    if _system_cache.get(path, (None,))[0] == stamp and stamp is not None:
        return _system_cache[path][1]
    table = {}
    if stamp is not None:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            try:
                row = json.loads(line)
                failure = row.get("failure")
                record = Record(row["solver"], row["family"],
                                None if failure else float(row["time_ms"]),
                                int(row.get("workspace", 0)), "system", failure)
                table.setdefault((row["device"], row["problem"]), []).append(record)
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("system find-db %s line %d skipped: %s", path, number, exc)
    _system_cache[path] = (stamp, table)
    return table

# }}}


def _has_table(conn, schema, table):
    return conn.execute(f"SELECT 1 FROM {schema}.sqlite_master WHERE type = 'table' AND name = ?",
                        (table,)).fetchone() is not None


class FindDb:
    """The user db over the system db; open one per use, it holds no connection between calls."""

    _checked = set()
    _check_lock = threading.Lock()

    def __init__(self, user_path=None, system_path=None):
        self.user_path = Path(user_path) if user_path else user_db_path()
        self.system_path = Path(system_path) if system_path else system_db_path()

    # {{{ sqlite plumbing

    def _connect(self):
        self.user_path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.user_path, timeout=_BUSY_TIMEOUT_S, isolation_level=None)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(_BUSY_TIMEOUT_S * 1000)}")
            conn.execute("PRAGMA journal_mode = WAL")
            if not _has_table(conn, "main", _TABLE):
                self._create(conn)
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
                conn.execute("ATTACH DATABASE ? AS old", (str(old_file),))
                if _has_table(conn, "old", _OLD_TABLE):
                    sources.append(f"old.{_OLD_TABLE}")
            for source in sources:
                conn.execute(f"INSERT OR IGNORE INTO {_TABLE} SELECT * FROM {source}")
                log.info("find-db: records of %s copied into %s", source, self.user_path)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        finally:
            if conn.execute("SELECT 1 FROM pragma_database_list WHERE name = 'old'").fetchone():
                conn.execute("DETACH DATABASE old")

    def _set_aside(self, reason):
        """Rename a corrupt user db out of the way (with its WAL files) so it is rebuilt."""
        aside = self.user_path.with_name(
            f"{self.user_path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
        log.warning("find-db %s is corrupt (%s): moved to %s and rebuilt empty",
                    self.user_path, reason, aside)
        for suffix in ("", "-wal", "-shm"):
            try:
                os.replace(f"{self.user_path}{suffix}", f"{aside}{suffix}")
            except FileNotFoundError:
                pass
        with self._check_lock:
            self._checked.discard(self.user_path)

    def _run(self, action):
        """Call ``action(conn)``; a corrupt file is set aside and the call retried once."""
        for attempt in (1, 2):
            try:
                conn = self._connect()
                try:
                    return action(conn)
                finally:
                    conn.close()
            except sqlite3.OperationalError as exc:
                if "not a database" in str(exc) or "malformed" in str(exc):
                    if attempt == 1:
                        self._set_aside(exc)
                        continue
                raise DatabaseError(f"find-db {self.user_path}: {exc}") from exc
            except sqlite3.DatabaseError as exc:
                if attempt == 1:
                    self._set_aside(exc)
                    continue
                raise DatabaseError(f"find-db {self.user_path} cannot be rebuilt: {exc}") from exc
        raise AssertionError("unreachable")

    # }}}

    def lookup(self, device, problem_key):
        """The records for a problem on a device, fastest first and failures last: the user db's,
        else the system db's."""
        rows = self._run(lambda conn: conn.execute(
            f"SELECT solver, family, time_ms, workspace, failure FROM {_TABLE}"
            " WHERE device = ? AND problem = ? ORDER BY failure IS NOT NULL, time_ms",
            (device, problem_key)).fetchall())
        if rows:
            return [Record(solver, family, time_ms, workspace, "user", failure)
                    for solver, family, time_ms, workspace, failure in rows]
        system = _system_records(self.system_path).get((device, problem_key), [])
        return sorted(system, key=lambda r: (r.failure is not None, r.time_ms or 0.0))

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
                conn.execute("ROLLBACK")
                raise
        self._run(write)

    def rows(self):
        """Every user-db row as a dict, grouped by device and problem."""
        def read(conn):
            cursor = conn.execute(
                f"SELECT device, problem, solver, family, time_ms, workspace, failure"
                f" FROM {_TABLE} ORDER BY device, problem, failure IS NOT NULL, time_ms")
            names = [column[0] for column in cursor.description]
            return [dict(zip(names, row)) for row in cursor.fetchall()]
        return self._run(read)

    def clear(self):
        """Delete every user-db record; returns how many there were."""
        return self._run(lambda conn: conn.execute(f"DELETE FROM {_TABLE}").rowcount)
