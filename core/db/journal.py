"""The job journal of scale-out runs: each job's state, in a table of the user find-db's file.

The client of a run (`convsolve tune --cluster ...`, scale/drive.py) is the only writer.  A job
is ``running`` from its dispatch until its records are in the dbs, then ``done``; a rerun of the
same command skips done jobs and runs the rest again (a ``running`` job left by a killed client
is stale).  ``attempts`` counts the starts a client saw (in-process runs, where a job that ends
the process ends the client too), so a job that keeps killing its process is ``failed`` after a
bound instead of killing every resume.  A failed job is named in each run's summary until the
journal forgets it (``--retune``, ``--retry``).
"""
from dataclasses import dataclass

from .. import env
from . import find_db
from .store import SqliteDb

_TABLE = "journal_v1"


@dataclass(frozen=True)
class Entry:
    """One job's line in the journal."""

    state: str      # 'running', 'done' or 'failed'
    attempts: int   # starts seen by a client
    detail: str     # a failure's reason, else ''


class Journal(SqliteDb):
    """The journal table in the user find-db's file (CONVSOLVE_USER_DB_PATH); open one per use.
    Every method works or raises ``convsolve.DatabaseError``."""

    name, table, path_var = "job journal", _TABLE, env.USER_DB_PATH
    schema = (f"CREATE TABLE IF NOT EXISTS {_TABLE} (job TEXT PRIMARY KEY, state TEXT NOT NULL,"
              " attempts INTEGER NOT NULL, detail TEXT NOT NULL, updated REAL NOT NULL)")
    key = ("job",)
    order = "job"

    def __init__(self, user_path=None):
        super().__init__(user_path or find_db.user_db_path())

    def entries(self):
        """{job id: Entry} of every job the journal holds."""
        return {row["job"]: Entry(row["state"], row["attempts"], row["detail"])
                for row in self.rows()}

    def mark(self, jobs, state, detail="", started=False):
        """Set the state of ``jobs`` (ids) in one transaction; ``started`` counts one more
        attempt for each."""
        known = self.entries() if jobs else {}
        self._upsert([{"job": job, "state": state, "detail": detail,
                       "attempts": known[job].attempts + started if job in known else int(started)}
                      for job in jobs], only_faster=False)

    def forget(self, jobs):
        """Drop ``jobs`` (ids) from the journal, so that a run does them again."""
        jobs = list(jobs)
        if jobs:
            self._write(lambda conn: conn.executemany(
                f"DELETE FROM {_TABLE} WHERE job = ?", [(job,) for job in jobs]).rowcount)
