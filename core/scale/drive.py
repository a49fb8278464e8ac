"""The client of a run: jobs through an executor, the journal kept, results merged, a summary.

The client is the only writer of the user dbs: each finished job's rows are merged as `convsolve
db import` merges (never over a record as fast or faster, only of the job's device), then its
journal entry is ``done``, with the value the job gave (a resumed run shows it again). A client
killed between the two runs the job again on resume, and the merge of the same rows changes
nothing: nothing is lost and nothing is recorded twice.
"""
import json
import logging
import sys
from collections import Counter
from dataclasses import dataclass, field

import tqdm

from ..db import transfer
from ..db.journal import Journal
from .jobs import seeds

log = logging.getLogger("convsolve")

#: A job found ``running`` (its client gone) this many times after it started fails.
MAX_ATTEMPTS = 3


@dataclass
class Summary:
    """What a run did: results of jobs run now, jobs skipped as done before (with the value
    they gave then), failed jobs with why, and per device kind a Counter of done / skipped /
    failed."""

    results: list = field(default_factory=list)   # (job, Result) of the jobs run now
    skipped: list = field(default_factory=list)   # (job, value) of the jobs done before
    failed: dict = field(default_factory=dict)    # job -> why
    devices: dict = field(default_factory=dict)   # device -> Counter

    def count(self, job, what):
        self.devices.setdefault(job.device, Counter())[what] += 1

    def text(self, done="done"):
        """Lines: totals, each device's counts, then each failed job and why (``done`` names
        what a finished job is: tuned, timed, found)."""
        ran = len(self.results) - sum(1 for _, r in self.results if r.error)
        lines = [(f"{ran} {done}, {len(self.skipped)} skipped (done before), "
                  f"{len(self.failed)} failed")]
        lines += [f"  {device}: " + ", ".join(f"{counts[w]} {w}" for w in (done, "skipped",
                                                                             "failed"))
                  for device, counts in sorted(self.devices.items())]
        lines += [f"failed: {job.label or job.problem} on {job.device}: {why}"
                  for job, why in self.failed.items()]
        return "\n".join(lines)


def drive(executor, jobs, on_result=None, desc="jobs", quiet=False, again=False, done="done"):
    """Run ``jobs`` through ``executor``, skipping those the journal has done or failed (all of
    them again when ``again``); ``on_result(job, result)`` sees each after its rows are merged.
    Returns the Summary; KeyboardInterrupt leaves the jobs not done to the next run."""
    journal, summary = Journal(), Summary()
    if again:
        journal.forget(job.id for job in jobs)
    entries, todo = journal.entries(), []
    for job in jobs:
        entry = entries.get(job.id)
        if entry is not None and entry.state == "running" and entry.attempts >= MAX_ATTEMPTS:
            why = f"its process ended under it {entry.attempts} times"
            journal.mark([job.id], "failed", why)
            entry = entry.__class__("failed", entry.attempts, why)
        if entry is not None and entry.state in ("done", "failed"):
            if entry.state == "done":
                summary.skipped.append((job, json.loads(entry.detail or "null")))
            else:
                summary.failed[job] = entry.detail
            summary.count(job, "skipped" if entry.state == "done" else "failed")
            continue
        todo.append(job)
    journal.mark([job.id for job in todo], "running")
    bar = tqdm.tqdm(total=len(todo), desc=desc, unit="job", file=sys.stderr,
                    disable=quiet or None)
    try:
        runs = executor.run(todo, seeds(todo) if executor.seeded else {},
                            lambda job: journal.mark([job.id], "running", started=True))
        for job, result in runs:
            bar.set_postfix_str(job.label or job.problem, refresh=False)
            _finish(journal, summary, job, result, on_result, done)
            bar.update()
    finally:
        bar.close()
    return summary


def _finish(journal, summary, job, result, on_result, done):
    """Merge a job's rows and note it: done; failed and forgotten (a job whose runner raised is
    tried again by the next run, as before); failed for good when it killed its workers."""
    if result.killed:
        journal.mark([job.id], "failed", result.error)
        summary.failed[job] = result.error
        summary.count(job, "failed")
        return
    if result.rows:
        report = transfer.merge_rows(result.rows, job.device)
        if report.refused or report.bad:   # rows_of gives the job's device's rows only
            log.warning("job %s: not every record merged: %s", job.id, report.text())
    summary.results.append((job, result))
    if on_result is not None:
        on_result(job, result)
    if result.error:
        journal.forget([job.id])
        summary.failed[job] = result.error
        summary.count(job, "failed")
    else:
        journal.mark([job.id], "done", json.dumps(result.value))
        summary.count(job, done)
