"""Tests of the bench's hot-loop timing, on a fake clock: what a sample calls, times and reports."""
import pytest
from convsolve.bench import hot_loop


class Work:
    """A call of scripted cost on a fake clock: ``cost(i)`` ms for the i-th call (from 0); it
    returns how many calls were made, itself included."""

    def __init__(self, cost):
        self.cost, self.now, self.calls = cost, 0.0, 0

    def clock(self):
        return self.now

    def __call__(self):
        self.now += self.cost(self.calls) / 1e3
        self.calls += 1
        return self.calls


def test_the_call_that_wakes_the_threads_is_not_timed():
    """A first call slowed by waking threads (20 ms) opens the sample untimed; the figure is the
    back-to-back calls' 0.05 ms, MAX_CALLS of them as 10 ms would take more."""
    work = Work(lambda i: 20.0 if i == 0 else 0.05)
    timed = hot_loop.sample(work, work.clock)
    assert [result for _, result in timed] == list(range(2, 2 + hot_loop.MAX_CALLS))
    assert hot_loop.median_ms(timed) == pytest.approx(0.05)
    assert work.calls == 1 + hot_loop.MAX_CALLS


def test_wake_up_lasts_wake_ms_and_timing_sample_ms():
    """Fast calls wake for WAKE_MS (4 calls of 0.3 ms), then are timed until SAMPLE_MS is spent
    (34 calls of 0.3 ms reach 10 ms)."""
    work = Work(lambda i: 0.3)
    timed = hot_loop.sample(work, work.clock)
    assert (hot_loop.WAKE_MS, hot_loop.SAMPLE_MS) == (1.0, 10.0)
    assert timed[0][1] == 5 and len(timed) == 34 and work.calls == 38
    assert all(ms == pytest.approx(0.3) for ms, _ in timed)


def test_a_slow_call_is_still_timed_min_calls_times():
    """A call slower than SAMPLE_MS wakes once and is timed MIN_CALLS times."""
    work = Work(lambda i: 30.0)
    timed = hot_loop.sample(work, work.clock)
    assert len(timed) == hot_loop.MIN_CALLS and work.calls == hot_loop.MIN_CALLS + 1
    assert hot_loop.median_ms(timed) == pytest.approx(30.0)


def test_one_call_held_up_by_another_process_does_not_move_the_figure():
    """The figure is the median call: one timed call held up for 20 ms leaves it at 1 ms."""
    work = Work(lambda i: 20.0 if i == 2 else 1.0)
    timed = hot_loop.sample(work, work.clock)
    assert max(ms for ms, _ in timed) == pytest.approx(20.0)
    assert hot_loop.median_ms(timed) == pytest.approx(1.0)
