"""Scale-out: jobs of one problem on one device kind, run in process or on a Dask cluster.

``jobs`` defines a job and runs one where it lands; ``executor`` has the in-process executor
(the default, no extra needed) and the Dask one (``pip install 'convsolve[dask]'``); ``workers``
starts Dask workers (`convsolve worker`); ``drive`` is the client: the journal, the merge into
the user dbs, the progress bar and the summary (docs/architecture.md, "Scale-out").
"""
from .drive import Summary, drive
from .executor import Dask, InProcess, connect, need_dask
from .jobs import Job, Result, job, run_job

__all__ = ["Dask", "InProcess", "Job", "Result", "Summary", "connect", "drive", "job",
           "need_dask", "run_job"]
