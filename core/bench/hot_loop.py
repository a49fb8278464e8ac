"""Timing a call as a framework runs it: back-to-back calls in a hot loop, the median per call.

A single call after a pause is not what a framework sees.  While the bench runs the other side,
the worker threads of this one (torch's OpenMP pool, PoCL's pthreads) go to sleep, and the first
call after that waits for them to wake and be scheduled again: on a loaded 2-core machine a
PyTorch convolution that runs in 0.04 ms back to back took 8-20 ms as the first call after a
pause, and the call after that was still slow about half the time.  So a sample first calls
for WAKE_MS untimed, then times calls back to back, and its figure is their median, which one
call held up by another process does not move.
"""
import statistics
import time

#: Untimed calls open each sample until this much time has passed (one call at least), so the
#: timed calls find the worker threads awake.
WAKE_MS = 1.0
#: Timed calls of a sample: until SAMPLE_MS of them have run and at least MIN_CALLS, at most
#: MAX_CALLS.
SAMPLE_MS = 10.0
MIN_CALLS = 3
MAX_CALLS = 100


def sample(call, clock=time.perf_counter):
    """[(ms, result)] of the timed calls of one sample of ``call`` (no arguments), each call
    timed with ``clock`` (seconds), after untimed calls for WAKE_MS."""
    begin = clock()
    call()
    while (clock() - begin) * 1e3 < WAKE_MS:
        call()
    timed, spent_ms = [], 0.0
    while len(timed) < MAX_CALLS and (len(timed) < MIN_CALLS or spent_ms < SAMPLE_MS):
        start = clock()
        result = call()
        timed.append(((clock() - start) * 1e3, result))
        spent_ms += timed[-1][0]
    return timed


def median_ms(timed):
    """The median milliseconds per call of a sample's ``timed`` calls."""
    return statistics.median(ms for ms, _ in timed)
