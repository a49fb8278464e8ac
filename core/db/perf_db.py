"""The perf-db: every config tried per device, problem and tunable solver, with its time or failure.

Two layers, as the find-db.  The user db (SQLite, WAL: sqlite_db.SqliteDb, with its robustness)
is written by the tuner and lives beside the find-db; the system db (JSON lines with "db": "perf",
read-only, by default the find-db's shipped file) answers below it.  Configs are stored as
canonical JSON (``tuning.config_key``), so one config is one record however its dict is ordered.
"""
import json
import logging
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from .. import env
from ..errors import DatabaseError
from ..tuning import config_key
from . import find_db
from .store import SqliteDb, line_names, line_outcome, system_table

log = logging.getLogger("convsolve")

SCHEMA_VERSION = 1
_TABLE = f"perf_v{SCHEMA_VERSION}"


@dataclass(frozen=True)
class Trial:
    """One config of a tunable solver, tried for one problem on one device."""

    config: dict          # the tunables, e.g. {"TM": 6, "TN": 16}
    time_ms: float        # None for a failure
    failure: str = None   # why it failed (build, run, wrong output), else None
    source: str = "user"  # 'user' or 'system': which db it came from


def user_db_path():
    """Path of the user perf-db: CONVSOLVE_PERF_DB_PATH, else in platformdirs' user data dir."""
    override = env.PERF_DB_PATH.raw()
    if override:
        return Path(override)
    return Path(platformdirs.user_data_dir("convsolve")) / f"perf_db_v{SCHEMA_VERSION}.sqlite"


def system_db_path():
    """Path of the read-only system perf-db: CONVSOLVE_SYSTEM_PERF_DB_PATH, else the system
    find-db's file (one shipped file holds both)."""
    override = env.SYSTEM_PERF_DB_PATH.raw()
    return Path(override) if override else find_db.system_db_path()


def line_row(row):
    """The perf-db row (the table's columns but 'updated') a JSON line holds, checked."""
    device, problem, solver = line_names(row)
    if not isinstance(row["config"], dict):
        raise TypeError(f"config {row['config']!r} is not a JSON object")
    time_ms, failure = line_outcome(row)
    return {"device": device, "problem": problem, "solver": solver,
            "config": config_key(row["config"]), "time_ms": time_ms, "failure": failure}


def _system_trial(row):
    r = line_row(row)
    return ((r["device"], r["problem"], r["solver"]),
            Trial(json.loads(r["config"]), r["time_ms"], r["failure"], "system"))


def _ordered(trials):
    """Fastest first, failures (and trials without a time) last."""
    return sorted(trials, key=lambda t: (t.failure is not None or t.time_ms is None,
                                         t.time_ms or 0.0))


def _fastest(trials):
    """The fastest trial that did not fail, or None."""
    timed = [t for t in trials if t.failure is None and t.time_ms is not None]
    return min(timed, key=lambda t: t.time_ms, default=None)


class PerfDb(SqliteDb):
    """The user perf-db over the system one; open one per use, it holds no connection between
    calls (its reads but rows() are memoised per process: memo.py).  Every public method works or
    raises ``convsolve.DatabaseError`` (but tuned, winners and keep).
    """

    name, table, path_var = "perf-db", _TABLE, env.PERF_DB_PATH
    schema = (f"CREATE TABLE IF NOT EXISTS {_TABLE} (device TEXT NOT NULL, problem TEXT NOT NULL,"
              " solver TEXT NOT NULL, config TEXT NOT NULL, time_ms REAL, failure TEXT,"
              " updated REAL NOT NULL, PRIMARY KEY (device, problem, solver, config))")
    key = ("device", "problem", "solver", "config")
    order = "device, problem, solver, failure IS NOT NULL OR time_ms IS NULL, time_ms"

    def __init__(self, user_path=None, system_path=None):
        super().__init__(user_path or user_db_path())
        self.system_path = Path(system_path) if system_path else system_db_path()

    def trials(self, device, problem_key, solver):
        """The user db's trials of ``solver`` for a problem on a device, fastest first and
        failures last."""
        return _ordered(Trial(json.loads(config), time_ms, failure)
                        for config, time_ms, failure in self._rows_of(device, problem_key, solver))

    def _rows_of(self, device, problem_key, solver):
        """(config, time_ms, failure) of each user-db trial of ``solver`` for a problem."""
        return self._read(("trials", device, problem_key, solver), lambda conn: tuple(conn.execute(
            f"SELECT config, time_ms, failure FROM {_TABLE}"
            " WHERE device = ? AND problem = ? AND solver = ?",
            (device, problem_key, solver)).fetchall()))

    def best(self, device, problem_key, solver):
        """The user db's fastest trial that did not fail, else the system db's, else None."""
        timed = [row for row in self._rows_of(device, problem_key, solver)
                 if row[2] is None and row[1] is not None]
        if not timed:   # min() below takes the first fastest, as _fastest(trials()) does
            return self._system_best(device, problem_key, solver)
        config, time_ms, _ = min(timed, key=lambda row: row[1])
        return Trial(json.loads(config), time_ms)

    def _system_best(self, device, problem_key, solver):
        table = system_table(self.system_path, "perf", _system_trial, "system perf-db")
        return _fastest(table.get((device, problem_key, solver), []))

    def tuned(self, device, problem_key, solver):
        """best() for find and run: a user db that cannot be read is warned about and counts as
        empty (the system db still answers), never costing a result."""
        try:
            return self.best(device, problem_key, solver)
        except DatabaseError as exc:
            log.warning("%s; its tuned configs are not used", exc)
            return self._system_best(device, problem_key, solver)

    def winners(self, device, solver, limit=8):
        """Configs that won ``solver``'s searches on other problems of the device (user db),
        most frequent winner first, at most ``limit``: a search times them early, as they are
        likely good and already built.  Warns and answers [] when the db cannot be read."""
        def read(conn):
            return tuple(conn.execute(
                f"SELECT config, COUNT(*) AS wins FROM (SELECT problem, config, MIN(time_ms)"
                f" FROM {_TABLE} WHERE device = ? AND solver = ? AND failure IS NULL"
                f" AND time_ms IS NOT NULL GROUP BY problem) GROUP BY config"
                f" ORDER BY wins DESC LIMIT ?", (device, solver, limit)).fetchall())
        try:
            rows = self._read(("winners", device, solver, limit), read)
            return [json.loads(config) for config, _ in rows]
        except DatabaseError as exc:
            log.warning("%s; no earlier winners are tried first", exc)
            return []

    def store(self, device, problem_key, solver, trials):
        """Record ``trials`` in one transaction, each replacing the earlier trial of its config."""
        self._upsert([{"device": device, "problem": problem_key, "solver": solver,
                       "config": config_key(t.config), "time_ms": t.time_ms,
                       "failure": t.failure} for t in trials], only_faster=False)

    def keep(self, device, problem_key, solver, trials):
        """store() for the tuner: True when stored; a db that cannot be written is warned about."""
        try:
            self.store(device, problem_key, solver, trials)
            return True
        except DatabaseError as exc:
            log.warning("%s; these trials were not recorded", exc)
            return False

    def rows(self):
        """Every user-db trial as a dict (its config a dict), by device, problem and solver,
        fastest first."""
        return [{**row, "config": json.loads(row["config"])} for row in super().rows()]
