"""Jobs of a scale-out run: one problem on one device kind, run where it lands, its records as data.

A job names its runner (``"module:function"``, imported where the job runs), which measures the
problem on a handle of the job's device and returns a picklable value; the dbs' records of the
problem that the run left (every candidate's find-db record, failures included, and every
perf-db trial) come back with it as export-format rows, so the client can merge them.  Where
a worker runs the job, its dbs are a scratch copy of its own (scale/workers.py), seeded with the
client's perf-db trials of the problem: workers never write the user dbs.
"""
import importlib
import json
import traceback
from dataclasses import dataclass

from ..db import find_db, perf_db
from ..errors import ConvsolveError, ValidationError
from ..problem import Problem
from ..solvers.policy import Policy


@dataclass(frozen=True)
class Job:
    """One problem x direction (its key) on one device kind (a ``Handle.db_key``); ``runner``
    is ``"module:function"``, called as ``function(handle, problem, **params, **extra)``:
    ``params`` say what is measured (they are part of the job's id), ``extra`` only how (a
    search again where the perf-db has a config)."""

    runner: str
    problem: str
    device: str
    params: tuple = ()   # sorted (name, value) pairs, JSON values
    label: str = ""
    extra: tuple = ()    # (name, value) pairs, outside the id
    ahead: bool = True   # whether compile workers build its kernels first (scale/workers.py)

    @property
    def id(self):
        """The job's identity in the journal: runner, device, problem and parameters."""
        return f"{self.runner} {self.device} {self.problem} {json.dumps(dict(self.params))}"


def job(runner, problem, device, label="", extra=(), ahead=True, **params):
    """A Job of ``problem`` (a Problem or its key) with ``params`` (JSON values)."""
    key = problem.key() if isinstance(problem, Problem) else problem
    return Job(runner, key, device, tuple(sorted(params.items())), label, tuple(extra), ahead)


@dataclass(frozen=True)
class Result:
    """What a job gave back: the runner's value, or ``error`` (one line) when it raised; the
    find-db and perf-db rows of its problem on its device, in export format ({"db": ...})."""

    value: object = None
    rows: tuple = ()
    error: str = ""
    killed: bool = False   # the job's worker died under it more often than the scheduler allows


def rows_of(device, problem_key):
    """The user dbs' rows of a problem on a device, in export format: its find-db records under
    the numerical policy of the environment (the key find records) and its perf-db trials."""
    return _rows_by_problem(device)(device, problem_key)


def _rows_by_problem(device=None):
    """A function (device, problem key) -> its export rows (rows_of's), over one read of the
    user dbs (of ``device`` only, when given)."""
    index = {}
    for kind, db in (("find", find_db.FindDb), ("perf", perf_db.PerfDb)):
        for row in db().rows():
            if device is None or row["device"] == device:
                index.setdefault((kind, row["device"], row["problem"]), []).append(
                    {"db": kind, **row})

    def rows(device, problem_key):
        find_key = Policy.resolve().db_key(Problem.from_key(problem_key))
        return tuple(index.get(("find", device, find_key), []) +
                     index.get(("perf", device, problem_key), []))
    return rows


def seeds(jobs):
    """{job id: the client's rows of its problem and device} for ``jobs``, from one read."""
    rows = _rows_by_problem()
    return {job.id: rows(job.device, job.problem) for job in jobs}


def runner_of(name):
    """The function a runner name (``"module:function"``) names; ValidationError when it does
    not import."""
    module, _, function = name.partition(":")
    try:
        return getattr(importlib.import_module(module), function)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ValidationError("runner", name, f"does not name a function ({exc})") from exc


def run_job(job, handle):
    """Run ``job`` on ``handle`` (of the job's device) in this process: its Result.  A runner
    that raises gives a Result with the error's first line (and the records it left)."""
    if handle.db_key != job.device:
        return Result(error=f"this worker's device is {handle.db_key!r}, not the job's "
                            f"{job.device!r}")
    try:
        value, error = runner_of(job.runner)(handle, Problem.from_key(job.problem),
                                             **dict(job.params), **dict(job.extra)), ""
    except ConvsolveError as exc:
        value, error = None, str(exc).splitlines()[0]
    except Exception as exc:  # noqa: BLE001 - a bug in a runner is this job's, not the run's
        value, error = None, f"{type(exc).__name__}: {exc} ({traceback.format_exc(limit=-1)!r})"
    return Result(value, rows_of(job.device, job.problem), error)
