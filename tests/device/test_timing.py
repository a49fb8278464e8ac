"""Timing: a warm-up, then batched samples within the budget; slow solvers are cut off."""
from convsolve.device import timing


class FakeEvent:
    """Stands in for a finished pyopencl.Event with profiling times in ns."""

    def __init__(self, start_ms, end_ms):
        self.profile = type("P", (), {"start": start_ms * 1e6, "end": end_ms * 1e6})()


def counting_invoker(times_ms):
    """An invoker whose n-th run takes times_ms[n] (the last one from then on), two kernels
    back to back on a device clock that runs on."""
    calls, clock = [], [0.0]

    def invoker(buffers, scratch):
        t, start = times_ms[min(len(calls), len(times_ms) - 1)], clock[0]
        calls.append(t)
        clock[0] += t
        return [FakeEvent(start, start + t / 2), FakeEvent(start + t / 2, start + t)]
    return invoker, calls


def test_median_of_samples_after_warmup(monkeypatch):
    """The warm-up is not counted; the result is the median of the samples."""
    monkeypatch.setattr(timing.cl, "wait_for_events", lambda events: None)
    invoker, calls = counting_invoker([100.0, 3.0, 1.0, 2.0, 5.0, 4.0])
    assert timing.time_invoker(invoker, None, None, budget_ms=1000) == 3.0
    assert len(calls) == 1 + timing.SAMPLES


def test_budget_and_cutoff_stop_sampling(monkeypatch):
    """Sampling stops when the budget is spent, and when the first CUTOFF_LOOKS samples are all
    past the cutoff: the lower of them is the answer."""
    monkeypatch.setattr(timing.cl, "wait_for_events", lambda events: None)
    invoker, calls = counting_invoker([10.0])
    assert timing.time_invoker(invoker, None, None, budget_ms=25) == 10.0
    assert len(calls) == 1 + 3
    invoker, calls = counting_invoker([50.0, 60.0, 40.0])
    assert timing.time_invoker(invoker, None, None, budget_ms=1000, cutoff_ms=20) == 40.0
    assert len(calls) == 1 + timing.CUTOFF_LOOKS == 3
    invoker, calls = counting_invoker([5000.0, 2000.0])
    assert timing.time_invoker(invoker, None, None, budget_ms=1000) == 2000.0
    assert len(calls) == 2          # the warm-up (never the answer) and one sample


def test_one_outlier_sample_is_not_cut_off(monkeypatch):
    """A first sample past the cutoff followed by one within it (the host busy for a moment) is
    sampled on; the even count's lower middle sample is the answer."""
    monkeypatch.setattr(timing.cl, "wait_for_events", lambda events: None)
    invoker, calls = counting_invoker([10.0, 90.0, 10.0, 12.0, 11.0, 13.0])
    assert timing.time_invoker(invoker, None, None, budget_ms=1000, cutoff_ms=20) == 12.0
    assert len(calls) == 1 + timing.SAMPLES
    invoker, calls = counting_invoker([10.0, 90.0, 10.0])
    assert timing.time_invoker(invoker, None, None, budget_ms=95, cutoff_ms=20) == 10.0
    assert len(calls) == 1 + 2      # the budget spent after two samples: the lower one


def test_slow_first_launch_is_not_cut_off(monkeypatch):
    """A warm-up slowed by one-off costs does not trigger the cutoff; the samples decide."""
    monkeypatch.setattr(timing.cl, "wait_for_events", lambda events: None)
    invoker, calls = counting_invoker([500.0, 10.0])
    assert timing.time_invoker(invoker, None, None, budget_ms=1000, cutoff_ms=20) == 10.0
    assert len(calls) == 1 + timing.SAMPLES


def test_short_runs_are_timed_in_batches(monkeypatch):
    """Runs shorter than BATCH_MS are sampled back to back, a batch's span over its runs."""
    monkeypatch.setattr(timing.cl, "wait_for_events", lambda events: None)
    invoker, calls = counting_invoker([1.0, 0.25])
    runs = timing.batch_runs(1.0)
    assert runs == 2 == round(timing.BATCH_MS / 1.0)
    assert timing.time_invoker(invoker, None, None, budget_ms=1000) == 0.25
    assert len(calls) == 1 + runs * timing.SAMPLES
    assert timing.batch_runs(1e-6) == timing.MAX_BATCH
    assert timing.batch_runs(10 * timing.BATCH_MS) == 1


def test_no_events_is_zero():
    """An invoker with nothing to do takes no time."""
    assert timing.elapsed_ms([]) == 0.0


def test_warm_up_holds_the_device_shared_and_the_samples_alone(monkeypatch):
    """With a hold set (other processes use the device), time_invoker's warm-up holds it beside
    them and its samples hold it alone, once for all; a section inside a held one holds
    nothing more."""
    monkeypatch.setattr(timing.cl, "wait_for_events", lambda events: None)
    invoker, calls = counting_invoker([10.0])
    log = []

    class Hold:
        def __init__(self, alone):
            self.how = "alone" if alone else "shared"

        def __enter__(self):
            log.append((self.how, len(calls)))
            with timing.held():   # nested: already held
                log.append("inner")

        def __exit__(self, *exc):
            log.append(("done", len(calls)))

    token = timing.HOLD.set(Hold)
    try:
        timing.time_invoker(invoker, None, None, budget_ms=25)
    finally:
        timing.HOLD.reset(token)
    assert log == [("shared", 0), "inner", ("done", 1), ("alone", 1), "inner", ("done", 1 + 3)]
    with timing.held():   # no hold set: nothing to take
        assert timing.HOLD.get() is None
