"""Executors: where a run's jobs execute, in this process (the default) or on a Dask cluster.

An executor has ``kinds()`` (the device kinds it can time on) and ``run(jobs, seeds, started)``,
which yields ``(job, Result)`` as jobs finish, in any order; ``seeds`` are the client's rows of
each job's problem (jobs.seeds, where ``seeded`` says the executor wants them) and
``started(job)`` is called when a job is known to start (in process: before it runs).
``connect`` makes the Dask one from ``--cluster``: ``local`` (a cluster of this host's device
and cores, closed with the executor), a scheduler file, or a scheduler's address.
"""
import logging
import os
import shutil

from ..device.handle import Handle
from ..errors import ValidationError
from .jobs import Result, run_job
from .workers import COMPILE, TIMING, prebuild, remote, worker_spec

log = logging.getLogger("convsolve")

#: How often the scheduler reruns a job whose worker died under it before the job fails.
ALLOWED_FAILURES = 2
#: How long a client waits for a cluster's first timing worker.
WAIT_FOR_WORKERS_S = 60


def need_dask(flag="--cluster", value=None):
    """The ``distributed`` module; a ValidationError (a missing requirement) of one line naming
    the extra when it is not installed."""
    try:
        import distributed
    except ImportError:
        raise ValidationError(flag, value, "needs Dask's distributed, which is not installed: "
                              "pip install 'convsolve[dask]'") from None
    return distributed


class InProcess:
    """Every job in this process on one handle, one after the other: today's behaviour."""

    seeded = False   # its jobs read and write the user dbs themselves

    def __init__(self, handle):
        self.handle = handle

    def kinds(self):
        return [self.handle.db_key]

    def run(self, jobs, seeds, started):
        for job in jobs:
            started(job)
            yield job, run_job(job, self.handle)

    def close(self):
        pass


class Dask:
    """Jobs on a Dask cluster: each on a worker of its device kind that times, after a compile
    job on any worker of that kind where the workers build ahead (workers.py).  A
    job whose worker dies is rerun by the scheduler, ALLOWED_FAILURES times at most for a local
    cluster (the scheduler's ``allowed-failures`` elsewhere), then comes back ``killed``; jobs
    whose futures a lost scheduler connection cancelled are submitted again."""

    seeded = True   # its workers' dbs start from the client's rows of each job's problem

    def __init__(self, client, cluster=None, only=None, scratch=()):
        self.client, self.cluster, self.only, self.scratch = client, cluster, only, scratch

    def _resources(self):
        workers = self.client.scheduler_info(n_workers=-1)["workers"].values()
        return {name for worker in workers for name in worker.get("resources", {})}

    def kinds(self):
        self.client.wait_for_workers(1, timeout=WAIT_FOR_WORKERS_S)
        kinds = sorted(name[len(TIMING):] for name in self._resources() if name.startswith(TIMING))
        return [kind for kind in kinds if not self.only or self.only.lower() in kind.lower()]

    def _submit(self, job, seed, compiling, order):
        """The timing future of ``job``, the ``order``-th: jobs go in order, each one's compile
        job before it, so that a worker free to time does not compile ahead first."""
        built = ()
        if job.ahead and job.device in compiling:
            built = (self.client.submit(prebuild, job, seed, pure=False,
                                        key=f"compile {job.id}", priority=-order,
                                        resources={COMPILE + job.device: 1}),)
        return self.client.submit(remote, job, seed, *built, pure=False, key=job.id,
                                  priority=-order, resources={TIMING + job.device: 1})

    def run(self, jobs, seeds, started):
        distributed = need_dask()
        compiling = {name[len(COMPILE):] for name in self._resources() if name.startswith(COMPILE)}
        while jobs:
            pending = {self._submit(job, seeds.get(job.id), compiling, i): job
                       for i, job in enumerate(jobs)}
            jobs = []   # those lost with a scheduler, submitted again once it is back
            for future in distributed.as_completed(list(pending)):
                job = pending.pop(future)
                try:
                    result = future.result()
                except distributed.KilledWorker as exc:
                    result = Result(error=f"its worker died under it each time it ran ({exc})",
                                    killed=True)
                except (distributed.client.FutureCancelledError, OSError) as exc:
                    log.warning("job %s lost (%s): submitting it again", job.label or job.id, exc)
                    jobs.append(job)
                    continue
                yield job, result
            if jobs:
                self.client.wait_for_workers(1, timeout=WAIT_FOR_WORKERS_S)

    def close(self):
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()
        for directory in self.scratch:
            shutil.rmtree(directory, ignore_errors=True)


def local_cluster(device=None, compile_workers=None):
    """(A Dask cluster on this host: a timing worker on ``device`` and ``compile_workers``
    compile workers (None: one per core beyond the first); the workers' scratch directories)."""
    distributed, dask = need_dask(), __import__("dask")
    if compile_workers is None:
        compile_workers = max((os.cpu_count() or 1) - 1, 0)
    logging.getLogger("distributed").setLevel(logging.WARNING)
    dask.config.set({"distributed.scheduler.allowed-failures": ALLOWED_FAILURES})
    handle = Handle(device)
    specs = {"timing": worker_spec(handle, device, "timing")}
    specs.update({f"compile-{i}": worker_spec(handle, device, "compile")
                  for i in range(compile_workers)})
    workers = {name: {"cls": distributed.Nanny, "options": options}
               for name, (options, _) in specs.items()}
    return distributed.SpecCluster(workers=workers, scheduler={
        "cls": distributed.Scheduler, "options": {"dashboard_address": None}},
        silence_logs=logging.WARNING), [scratch for _, scratch in specs.values()]


def connect(cluster, device=None, compile_workers=None):
    """The executor ``--cluster`` names: None, in this process on ``device``; ``local``, a local
    cluster; an existing file, a scheduler file; else a scheduler's address."""
    if compile_workers is not None and compile_workers < 0:
        raise ValidationError("--compile-workers", compile_workers, "expected 0 or more")
    if cluster is None:
        if compile_workers:
            raise ValidationError("--compile-workers", compile_workers, "needs --cluster local")
        return InProcess(Handle(device))
    distributed = need_dask("--cluster", cluster)
    if cluster == "local":
        made, scratch = local_cluster(device, compile_workers)
        return Dask(distributed.Client(made), made, scratch=scratch)
    if compile_workers:
        raise ValidationError("--compile-workers", compile_workers, "needs --cluster local "
                              "(start them with convsolve worker --compile-workers N)")
    if os.path.isfile(cluster):
        return Dask(distributed.Client(scheduler_file=cluster), only=device)
    return Dask(distributed.Client(cluster, timeout=WAIT_FOR_WORKERS_S), only=device)
