"""call_all: every call's result or error, a hung call cut off at its time limit."""
import threading

from convsolve.engine.parallel import Overdue, call_all


def test_results_errors_and_a_hung_call():
    """Results and exceptions come back per item; a call that hangs is Overdue, the rest finish."""
    release = threading.Event()

    def call(item):
        if item == "hang":
            release.wait()
        if item == "boom":
            raise ValueError("planted")
        return item * 2

    try:
        outcome = call_all(call, ["a", "hang", "boom", "b", "c"], workers=2, limit_s=0.3)
    finally:
        release.set()
    assert outcome["a"] == ("aa", None) and outcome["b"] == ("bb", None)
    assert outcome["c"] == ("cc", None)
    assert isinstance(outcome["boom"][1], ValueError)
    assert isinstance(outcome["hang"][1], Overdue)


def test_calls_see_the_callers_context():
    """Each call runs in a copy of the caller's context: a build in a worker thread holds the
    device as its caller would (device/timing.py's HOLD)."""
    from convsolve.device import timing
    token = timing.HOLD.set("the caller's hold")
    try:
        outcome = call_all(lambda item: timing.HOLD.get(), [1, 2, 3], 2, 5.0)
    finally:
        timing.HOLD.reset(token)
    assert outcome == {i: ("the caller's hold", None) for i in (1, 2, 3)}
