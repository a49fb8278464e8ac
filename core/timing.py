"""Timing an invoker with OpenCL profiling events: one warm-up run, then samples within a budget."""
import statistics

import pyopencl as cl

#: Timed runs after the warm-up, unless the time budget is spent first.
SAMPLES = 5


def elapsed_ms(events):
    """Milliseconds from the first event's start to the last event's end (0 for no events)."""
    if not events:
        return 0.0
    cl.wait_for_events(events)
    return (events[-1].profile.end - events[0].profile.start) * 1e-6


def time_invoker(invoker, buffers, scratch, budget_ms, cutoff_ms=None):
    """Median time in ms of ``invoker``: a warm-up run, then 1 to SAMPLES timed runs.

    The warm-up is never timed: first launches pay one-off costs (code generation on PoCL, which
    can take seconds with a cold cache, and cold caches).  Sampling stops once ``budget_ms`` of
    kernel time is spent, and after the first sample when that one is slower than ``cutoff_ms``
    (a multiple of the best time so far), so a slow solver costs find two runs at most.
    """
    elapsed_ms(invoker(buffers, scratch))
    samples, spent = [], 0.0
    while len(samples) < SAMPLES and spent < budget_ms:
        samples.append(elapsed_ms(invoker(buffers, scratch)))
        spent += samples[-1]
        if cutoff_ms is not None and samples[0] > cutoff_ms:
            break
    return statistics.median(samples)
