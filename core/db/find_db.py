"""The find-db: every benchmarked solver's time and workspace per device and problem.

Two layers.  The user db (SQLite, WAL: sqlite_db.SqliteDb, with its robustness: many writers, a
read-only file still read, a corrupt one set aside and rebuilt, every failure a DatabaseError) is
written by find and lives under platformdirs' user data dir; the system db (JSON lines, read-only,
shipped in the package) answers for problems the user db has not seen.  Solvers that failed to
build or run are recorded too (with the reason), so that a later find knows which solvers it has
already tried.
"""
import functools
import logging
import sqlite3
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import platformdirs

from .. import env
from ..errors import DatabaseError
from .store import SqliteDb, has_table, line_names, line_outcome, system_table, transaction

log = logging.getLogger("convsolve")

SCHEMA_VERSION = 3
_TABLE = f"find_v{SCHEMA_VERSION}"
#: The previous schema (its column ``algorithm`` is now ``family``), migrated on first use.
_OLD_TABLE = "find_v2"


@dataclass(frozen=True)
class Record:
    """One benchmarked solver for one problem on one device."""

    solver: str
    family: str
    time_ms: float         # None for a failure
    workspace: int
    source: str = "user"   # 'user' or 'system': which db it came from
    failure: str = None    # why find could not time it (failed to build or run), else None


@functools.lru_cache(maxsize=8)
def _path(text):
    return Path(text)


@functools.cache
def _default_user_db_path():
    return Path(platformdirs.user_data_dir("convsolve")) / f"find_db_v{SCHEMA_VERSION}.sqlite"


@functools.cache
def _packaged_system_db_path():
    return Path(str(resources.files("convsolve.db") / "system_db.jsonl"))


def user_db_path():
    """Path of the user db: CONVSOLVE_USER_DB_PATH, else in platformdirs' user data dir (each
    path made once a process: a find-db hit's whole budget is tens of microseconds)."""
    override = env.USER_DB_PATH.raw()
    return _path(override) if override else _default_user_db_path()


def system_db_path():
    """Path of the read-only system db: CONVSOLVE_SYSTEM_DB_PATH, else the packaged one."""
    override = env.SYSTEM_DB_PATH.raw()
    return _path(override) if override else _packaged_system_db_path()


def line_row(row):
    """The find-db row (the table's columns but 'updated') a JSON line holds, checked."""
    device, problem, solver = line_names(row)
    time_ms, failure = line_outcome(row)
    return {"device": device, "problem": problem, "solver": solver, "family": str(row["family"]),
            "time_ms": time_ms, "workspace": int(row.get("workspace", 0)), "failure": failure}


def _system_record(row):
    r = line_row(row)
    return (r["device"], r["problem"]), Record(r["solver"], r["family"], r["time_ms"],
                                               r["workspace"], "system", r["failure"])


def _system_records(path):
    """{(device, problem): [Record]} from a JSON-lines file's find lines ("db" absent or
    "find"); bad lines are logged and skipped, an unreadable file is logged and answers nothing."""
    return system_table(path, "find", _system_record, "system find-db")


class FindDb(SqliteDb):
    """The user db over the system db; open one per use, it holds no connection between calls
    (lookups are memoised per process: memo.py).

    Every public method works or raises ``convsolve.DatabaseError``, whose first line names the
    file, what failed, why and what to do.
    """

    name, table, path_var = "find-db", _TABLE, env.USER_DB_PATH
    schema = (f"CREATE TABLE IF NOT EXISTS {_TABLE} (device TEXT NOT NULL, problem TEXT NOT NULL,"
              " solver TEXT NOT NULL, family TEXT NOT NULL, time_ms REAL,"
              " workspace INTEGER NOT NULL, failure TEXT, updated REAL NOT NULL,"
              " PRIMARY KEY (device, problem, solver))")
    key = ("device", "problem", "solver")
    order = "device, problem, failure IS NOT NULL, time_ms"

    def __init__(self, user_path=None, system_path=None):
        super().__init__(user_path or user_db_path())
        self.system_path = _path(str(system_path)) if system_path else system_db_path()

    def _create(self, conn):
        """Create the table, copying the records of a schema-2 db (same file, or the default
        ``find_db_v2.sqlite`` beside this one) so that an upgrade loses nothing."""
        def create():
            conn.execute(self.schema)
            old_file = self.user_path.with_name(f"find_db_v{SCHEMA_VERSION - 1}.sqlite")
            sources = [f"main.{_OLD_TABLE}"] if has_table(conn, "main", _OLD_TABLE) else []
            if not sources and old_file.exists() and old_file != self.user_path:
                try:
                    conn.execute("ATTACH DATABASE ? AS old", (str(old_file),))
                    if has_table(conn, "old", _OLD_TABLE):
                        sources.append(f"old.{_OLD_TABLE}")
                except sqlite3.DatabaseError as exc:   # its trouble is not this file's
                    log.warning("find-db: records of %s not copied: %s", old_file, exc)
            for source in sources:
                conn.execute(f"INSERT OR IGNORE INTO {_TABLE} SELECT * FROM {source}")
                log.info("find-db: records of %s copied into %s", source, self.user_path)
        try:
            transaction(conn, create)
        finally:
            if conn.execute("SELECT 1 FROM pragma_database_list WHERE name = 'old'").fetchone():
                conn.execute("DETACH DATABASE old")

    def lookup(self, device, problem_key):
        """The records for a problem on a device, fastest first and failures last: the user db's,
        else the system db's."""
        records = self._read(("lookup", device, problem_key), lambda conn: tuple(
            Record(solver, family, time_ms, workspace, "user", failure)
            for solver, family, time_ms, workspace, failure in conn.execute(
                f"SELECT solver, family, time_ms, workspace, failure FROM {_TABLE}"
                " WHERE device = ? AND problem = ? ORDER BY failure IS NOT NULL, time_ms",
                (device, problem_key))))
        return list(records) if records else self._system_lookup(device, problem_key)

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
        def write(conn):
            conn.execute(f"DELETE FROM {_TABLE} WHERE device = ? AND problem = ?",
                         (device, problem_key))
            conn.executemany(
                f"INSERT INTO {_TABLE} VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [(device, problem_key, r.solver, r.family, r.time_ms, r.workspace,
                  r.failure, now) for r in records])
        now = time.time()
        self._write(write)
