"""Tests of the bench's hot-loop timing, on a fake clock: what a sample calls, times and reports."""
import pytest
from convsolve.bench import hot_loop
from convsolve.bench.hot_loop import HotLoop


class Work:
    """A call of known cost on a fake clock, modelling worker threads that sleep: after a pause
    of more than 2 ms the next ``waking`` calls take ``wake_ms`` each, other calls ``steady_ms``;
    ``cost`` (call index -> ms or None) overrides both.  A call returns its index."""

    def __init__(self, steady_ms, waking=0, wake_ms=20.0, cost=lambda index: None):
        self.steady_ms, self.waking, self.wake_ms, self.cost = steady_ms, waking, wake_ms, cost
        self.now, self.calls, self.last_end, self.asleep = 0.0, 0, float("-inf"), 0

    def clock(self):
        return self.now

    def pause(self, ms):
        self.now += ms / 1e3

    def __call__(self):
        if self.now - self.last_end > 0.002:
            self.asleep = self.waking
        ms = self.cost(self.calls)
        if ms is None:
            ms = self.wake_ms if self.asleep else self.steady_ms
        self.asleep = max(0, self.asleep - 1)
        self.now += ms / 1e3
        self.last_end, self.calls = self.now, self.calls + 1
        return self.calls - 1


def test_the_calls_that_wake_the_threads_are_not_timed():
    """After the pause between sides, three 20 ms calls wake the threads untimed (and the first
    fast one, which ends the wake-up); the sample is MAX_CALLS back-to-back 0.05 ms calls (20 ms
    would take more) and reports 0.05 ms."""
    work = Work(0.05, waking=3)
    loop = HotLoop(work, work.clock)
    work.pause(5)
    first = work.calls
    timed = loop.sample()
    assert [index for _, index in timed] == list(range(first + 4, first + 4 + hot_loop.MAX_CALLS))
    assert all(ms == pytest.approx(0.05) for ms, _ in timed)
    assert hot_loop.median_ms(timed) == pytest.approx(0.05)


def test_the_fastest_call_sets_how_many_calls_a_sample_times():
    """A 0.3 ms call is timed 66 times a sample (20 ms), after 4 untimed calls (1 ms)."""
    work = Work(0.3)
    loop = HotLoop(work, work.clock)
    first = work.calls
    timed = loop.sample()
    assert (hot_loop.SAMPLE_MS, hot_loop.WAKE_MS) == (20.0, 1.0)
    assert len(timed) == 66 and timed[0][1] == first + 4 and work.calls == first + 70


def test_a_slow_call_is_timed_min_calls_times():
    """A call slower than SAMPLE_MS wakes once and is timed MIN_CALLS times."""
    work = Work(30.0)
    loop = HotLoop(work, work.clock)
    first = work.calls
    timed = loop.sample()
    assert len(timed) == hot_loop.MIN_CALLS and work.calls == first + 1 + hot_loop.MIN_CALLS
    assert hot_loop.median_ms(timed) == pytest.approx(30.0)


def test_one_call_held_up_by_another_process_does_not_move_the_figure():
    """The figure is the median call: a timed call held up for 20 ms leaves it at 1 ms."""
    work = Work(1.0)
    loop = HotLoop(work, work.clock)
    held = work.calls + 5
    work.cost = lambda index: 20.0 if index == held else None
    timed = loop.sample()
    assert max(ms for ms, _ in timed) == pytest.approx(20.0)
    assert hot_loop.median_ms(timed) == pytest.approx(1.0)


def test_a_machine_that_turns_busy_bounds_the_wake_and_the_sample():
    """When every call turns 30 ms slow, the wake-up stops after WAKE_LIMIT_MS (4 calls) and the
    sample after SAMPLE_LIMIT_MS (7 calls), not after the 100 its 0.05 ms calls had set."""
    work = Work(0.05)
    loop = HotLoop(work, work.clock)
    first = work.calls
    work.cost = lambda index: 30.0
    timed = loop.sample()
    assert (hot_loop.WAKE_LIMIT_MS, hot_loop.SAMPLE_LIMIT_MS) == (100.0, 200.0)
    assert timed[0][1] == first + 4 and len(timed) == 7
