"""Timing: a warm-up, then samples within the budget; slow solvers are cut off."""
from convsolve.device import timing


class FakeEvent:
    """Stands in for a finished pyopencl.Event with profiling times in ns."""

    def __init__(self, start_ms, end_ms):
        self.profile = type("P", (), {"start": start_ms * 1e6, "end": end_ms * 1e6})()


def counting_invoker(times_ms):
    calls = []

    def invoker(buffers, scratch):
        t = times_ms[min(len(calls), len(times_ms) - 1)]
        calls.append(t)
        return [FakeEvent(0, t / 2), FakeEvent(t / 2, t)]
    return invoker, calls


def test_median_of_samples_after_warmup(monkeypatch):
    """The warm-up is not counted; the result is the median of the samples."""
    monkeypatch.setattr(timing.cl, "wait_for_events", lambda events: None)
    invoker, calls = counting_invoker([100.0, 3.0, 1.0, 2.0, 5.0, 4.0])
    assert timing.time_invoker(invoker, None, None, budget_ms=1000) == 3.0
    assert len(calls) == 1 + timing.SAMPLES


def test_budget_and_cutoff_stop_sampling(monkeypatch):
    """Sampling stops when the budget is spent; a first sample past the cutoff is the answer."""
    monkeypatch.setattr(timing.cl, "wait_for_events", lambda events: None)
    invoker, calls = counting_invoker([10.0])
    assert timing.time_invoker(invoker, None, None, budget_ms=25) == 10.0
    assert len(calls) == 1 + 3
    invoker, calls = counting_invoker([50.0])
    assert timing.time_invoker(invoker, None, None, budget_ms=1000, cutoff_ms=20) == 50.0
    assert len(calls) == 2          # the warm-up and one sample
    invoker, calls = counting_invoker([5000.0, 2000.0])
    assert timing.time_invoker(invoker, None, None, budget_ms=1000) == 2000.0
    assert len(calls) == 2          # the warm-up (never the answer) and one sample


def test_slow_first_launch_is_not_cut_off(monkeypatch):
    """A warm-up slowed by one-off costs does not trigger the cutoff; the samples decide."""
    monkeypatch.setattr(timing.cl, "wait_for_events", lambda events: None)
    invoker, calls = counting_invoker([500.0, 10.0])
    assert timing.time_invoker(invoker, None, None, budget_ms=1000, cutoff_ms=20) == 10.0
    assert len(calls) == 1 + timing.SAMPLES


def test_no_events_is_zero():
    """An invoker with nothing to do takes no time."""
    assert timing.elapsed_ms([]) == 0.0
