"""Timing an invoker with OpenCL profiling events: one warm-up run, then samples within a budget.

A sample is a batch of back-to-back runs (enqueued together, one wait), its time the batch's
span over its runs: what a framework enqueueing layer after layer sees.  A single run followed
by a wait lets the device's threads go idle between runs; on a CPU (PoCL) the next short run
then often starts on fewer cores, and the same run measured 1x or 2x its time from one sample
to the next.  A batch's span also holds the host's enqueueing of its later runs where that
outlasts their kernels: a solver whose calls cost more host time than kernel time is timed at
the host's pace, as it would run in a pipeline.

Where several processes run jobs on one device (a Dask cluster on a CPU device: scale/workers.py),
their timed samples hold the device alone and their builds and warm-up runs (where PoCL
generates code) hold it beside each other (``held``, through the hold that ``HOLD`` gives), so
a timing never runs beside another process's build or warm-up.
"""
import contextlib
import contextvars
import math
import statistics
import threading

import pyopencl as cl

from ..errors import ConvsolveError

#: Timed runs after the warm-up, unless the time budget is spent first.
SAMPLES = 5
#: A sample's batch holds enough runs to last about this long (0: a run a sample) ...
BATCH_MS = 2.0
#: ... and at most this many runs.
MAX_BATCH = 16
#: Samples over the cutoff that settle a solver as too slow: one sample can be an outlier (the
#: host or the device busy elsewhere for a moment: of 2,400 problems collected twice on an AVX2
#: EPYC, 26 solvers in 24 problems were settled on one sample 3-90x their time in the other
#: collection, 2 of them within 10% of the best there), two in a row rarely are.
CUTOFF_LOOKS = 2

#: A function ``hold(alone)`` giving a context manager that holds this process's device
#: against the other processes using it: alone (to time), or beside other holders that are not
#: alone (to build, to warm up); None: this process has the device to itself.
HOLD = contextvars.ContextVar("convsolve_device_hold", default=None)


@contextlib.contextmanager
def held(alone=True):
    """Hold the device (HOLD's hold; nothing where none is set): ``alone`` for timed samples,
    else beside other builds and warm-ups.  Sections inside a held one hold nothing more."""
    hold = HOLD.get()
    if hold is None:
        yield
        return
    token = HOLD.set(None)
    try:
        with hold(alone):
            yield
    finally:
        HOLD.reset(token)


def elapsed_ms(events):
    """Milliseconds from the first event's start to the last event's end (0 for no events)."""
    if not events:
        return 0.0
    cl.wait_for_events(events)
    return (events[-1].profile.end - events[0].profile.start) * 1e-6


class RunTimeout(ConvsolveError):
    """A run whose kernels did not finish within the time limit (they may still be running)."""


def wait(events, limit_s):
    """Wait for ``events``, at most ``limit_s`` seconds (None: no limit); RunTimeout after that."""
    if limit_s is None:
        cl.wait_for_events(events)
        return
    waiter = threading.Thread(target=cl.wait_for_events, args=(events,), daemon=True)
    waiter.start()
    waiter.join(limit_s)
    if waiter.is_alive():
        raise RunTimeout(f"its kernels did not finish within {limit_s:g} s")


def batch_runs(run_ms):
    """How many back-to-back runs one sample of a run that takes ``run_ms`` holds."""
    return max(1, min(MAX_BATCH, math.ceil(BATCH_MS / max(run_ms, 1e-3))))


def time_batch(invoker, buffers, scratch, runs, limit_s=None):
    """Mean ms of ``runs`` runs of ``invoker`` enqueued back to back (RunTimeout after
    ``limit_s`` seconds for the whole batch)."""
    events = [event for _ in range(runs) for event in invoker(buffers, scratch)]
    wait(events, limit_s)
    return elapsed_ms(events) / runs


def warm_up(invoker, buffers, scratch, limit_s=None):
    """One untimed run of ``invoker`` (first launches pay one-off costs: code generation on
    PoCL, which can take seconds with a cold cache, and cold caches); returns the runs a batch
    of it holds, by that run's time."""
    with held(alone=False):
        return batch_runs(time_batch(invoker, buffers, scratch, 1, limit_s))


def settled(samples, cutoff_ms):
    """Whether ``samples`` (ms, in order) settle a solver as too slow: its first CUTOFF_LOOKS
    are all over ``cutoff_ms``."""
    return len(samples) >= CUTOFF_LOOKS and min(samples[:CUTOFF_LOOKS]) > cutoff_ms


def time_invoker(invoker, buffers, scratch, budget_ms, cutoff_ms=None, limit_s=None):
    """Median time in ms of ``invoker`` (the lower of the middle two for an even count): a
    warm-up run, then 1 to SAMPLES timed batches.

    The warm-up (warm_up) is never timed; its time sizes the batches.  Sampling
    stops once ``budget_ms`` of kernel time is spent, and once the samples have settled it as
    slower than ``cutoff_ms`` (a multiple of the best time so far; ``settled``), so a slow
    solver costs find three runs at most.  A batch still going after ``limit_s`` seconds raises
    RunTimeout.
    """
    runs = warm_up(invoker, buffers, scratch, limit_s)
    samples, spent = [], 0.0
    with held():
        while len(samples) < SAMPLES and spent < budget_ms:
            samples.append(time_batch(invoker, buffers, scratch, runs, limit_s))
            spent += samples[-1] * runs
            if cutoff_ms is not None and settled(samples, cutoff_ms):
                break
    return statistics.median_low(samples)
