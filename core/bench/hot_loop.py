"""Timing a call as a framework runs it: back-to-back calls in a hot loop, the median per call.

A single call after a pause is not what a framework sees.  While the bench runs the other side,
the worker threads of this one (torch's OpenMP pool, PoCL's pthreads) go to sleep and its data
leaves the caches; the first calls after that wait for the threads to wake and be scheduled
again, then reload the data.  On a loaded 2-core machine a PyTorch convolution that runs in
0.04 ms back to back took 8-20 ms as the first call after a 5 ms pause; a 0.62 ms depthwise
layer took 45, 42, 20, 1.4, 0.8, 0.7 ms on its first six calls after a 50 ms pause.  So a sample
first calls untimed until a call is about as fast as the fastest seen, then times a number of
calls fixed by that fastest time (not by the time they take, which would end the sample early
on slow calls), and its figure is their median, which a call held up by another process does
not move.
"""
import statistics
import time

#: The wake-up: untimed calls for WAKE_MS at least, until one takes at most SETTLED times the
#: fastest call seen, or for WAKE_LIMIT_MS at most (on a machine too busy to settle).
WAKE_MS = 1.0
SETTLED = 1.5
WAKE_LIMIT_MS = 100.0
#: Timed calls of a sample: as many as the fastest call seen fits in SAMPLE_MS, MIN_CALLS at
#: least, MAX_CALLS at most; a sample whose calls take SAMPLE_LIMIT_MS in all stops there (with
#: MIN_CALLS at least), so that a machine that turned busy cannot stretch it without end.
SAMPLE_MS = 20.0
MIN_CALLS = 3
MAX_CALLS = 100
SAMPLE_LIMIT_MS = 200.0


class HotLoop:
    """Samples of ``call`` (no arguments) timed with ``clock`` (seconds); one sample is taken on
    creation and not reported, so that the first reported one knows the call's fastest time."""

    def __init__(self, call, clock=time.perf_counter):
        self.call, self.clock = call, clock
        self.fastest_ms = None
        self.sample()

    def sample(self):
        """[(ms, result)] of one sample's timed calls, after its wake-up."""
        self._wake()
        calls = min(MAX_CALLS, max(MIN_CALLS, int(SAMPLE_MS / max(self.fastest_ms, 1e-9))))
        timed, spent_ms = [], 0.0
        while len(timed) < calls and (len(timed) < MIN_CALLS or spent_ms < SAMPLE_LIMIT_MS):
            timed.append(self._timed())
            spent_ms += timed[-1][0]
        return timed

    def _wake(self):
        begin = self.clock()
        while True:
            ms, _ = self._timed()
            waited_ms = (self.clock() - begin) * 1e3
            if waited_ms >= WAKE_LIMIT_MS or (
                    waited_ms >= WAKE_MS and ms <= SETTLED * self.fastest_ms):
                return

    def _timed(self):
        start = self.clock()
        result = self.call()
        ms = (self.clock() - start) * 1e3
        self.fastest_ms = ms if self.fastest_ms is None else min(self.fastest_ms, ms)
        return ms, result


def median_ms(timed):
    """The median milliseconds per call of a sample's ``timed`` calls."""
    return statistics.median(ms for ms, _ in timed)
