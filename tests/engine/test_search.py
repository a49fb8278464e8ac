"""Tuning: the search over a fake tunable solver with known relative timings, the perf-db it
fills, and find's use of it (exhaustive search, FIND_ENFORCE, TRUST_VERIFY); its progress bar."""
import contextvars
import io

import convsolve
import numpy as np
import pyopencl as cl
import pytest
import tqdm
from convsolve import Problem
from convsolve.db.find_db import FindDb, Record
from convsolve.db.perf_db import PerfDb
from convsolve.engine import benchmark as benchmark_module
from convsolve.engine import find as find_module
from convsolve.engine import search as search_module
from convsolve.engine.search import Budget, search
from convsolve.reference import relative_error
from convsolve.solvers import registry as plugins
from convsolve.testing import device_buffers, random_tensors

PROBLEM = Problem.conv2d((1, 2, 5, 4), (3, 2, 3, 3), padding=1)
FASTEST = {"SPIN": 0, "WRONG": 0}


@pytest.fixture
def tunable(monkeypatch):
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_tunable")   # alone: records stay complete
    plugins.reset()
    return convsolve.registry().get("tunable.Spin")


@pytest.fixture(autouse=True)
def known_costs(monkeypatch, fake_plugins_importable):
    """Search and find time each run by its config's known cost (1 ms + 1 ms per 10,000 SPIN
    iterations), not by the clock: the run still happens (its output is checked), but no
    ranking here depends on how loaded the machine is."""
    import cs_tunable

    def known_cost(invoker, buffers, scratch, budget_ms, cutoff_ms=None, limit_s=None):
        cl.wait_for_events(invoker(buffers, scratch))
        return 1.0 + cs_tunable.LAST_RUN["config"]["SPIN"] / 10000
    for module in (search_module, find_module, benchmark_module):
        monkeypatch.setattr(module, "time_invoker", known_cost)


@pytest.fixture
def buffers(handle):
    return device_buffers(handle, random_tensors(PROBLEM))


UNBOUNDED = Budget(None, None, None)


def _search(handle, solver, buffers, budget=UNBOUNDED, strategy="auto"):
    return search(handle, PROBLEM, solver, convsolve.Buffers(**buffers), None, budget, strategy)


def test_search_finds_the_fastest_valid_config_and_rejects_the_wrong_one(handle, tunable,
                                                                         buffers):
    """Exhaustively: the fastest config wins, the faster-still wrong one is refused with its
    error, the default's time is kept, and every trial is in the perf-db."""
    outcome = _search(handle, tunable, buffers, strategy="exhaustive")
    assert outcome.best.config == FASTEST and outcome.stopped == "space exhausted"
    assert outcome.default.config == tunable.default and outcome.speedup > 1
    wrong = [t for t in outcome.trials if t.config["WRONG"]]
    assert len(wrong) == 4 and all("wrong output" in t.failure and t.time_ms is None
                                   for t in wrong)
    stored = PerfDb().best(handle.db_key, PROBLEM.key(), "tunable.Spin")
    assert stored.config == FASTEST
    assert len(PerfDb().trials(handle.db_key, PROBLEM.key(), "tunable.Spin")) == 8


@pytest.mark.parametrize("budget, trials, why", [
    (Budget(configs=3, seconds=None, patience=None), 3, "budget of 3 configs"),
    (Budget(configs=None, seconds=1e-9, patience=None), 1, "budget of 1e-09 s"),
])
def test_budgets_stop_the_search(handle, tunable, buffers, budget, trials, why):
    """The config and seconds budgets stop a search where they say (the default always runs)."""
    outcome = _search(handle, tunable, buffers, budget)
    assert len(outcome.trials) == trials and outcome.stopped.startswith(why)


def test_patience_stops_a_search_that_no_longer_gains(handle, tunable, buffers, monkeypatch):
    """With the fastest config as default, patience 2 stops after two configs without gain."""
    monkeypatch.setattr(type(tunable), "default", FASTEST)
    outcome = _search(handle, tunable, buffers, Budget(None, None, 2), "exhaustive")
    assert outcome.best.config == FASTEST and "patience" in outcome.stopped
    assert len([t for t in outcome.trials if t.time_ms is not None]) == 3


def test_random_local_search_reaches_the_fastest_config(handle, tunable, buffers):
    """The neighbourhood walk finds the fastest config from the default in a small budget."""
    outcome = _search(handle, tunable, buffers, Budget(6, None, None), "random-local")
    assert outcome.best.config == FASTEST and len(outcome.trials) <= 6


def test_find_uses_the_tuned_config_after_an_exhaustive_find(handle, tunable, buffers):
    """find(exhaustive=True) tunes, records both dbs; then run builds the tuned config."""
    ranked = convsolve.find(handle, PROBLEM, **buffers, exhaustive=True)
    assert [s.solver for s in ranked] == ["tunable.Spin"]
    assert PerfDb().best(handle.db_key, PROBLEM.key(), "tunable.Spin").config == FASTEST
    built = []
    original = handle.invoker

    def spy(solver, problem, config=None):
        built.append(config)
        return original(solver, problem, config)
    handle.invoker = spy
    try:
        convsolve.run(handle, PROBLEM, "tunable.Spin", **buffers)
    finally:
        del handle.invoker
    assert built == [FASTEST]


def test_find_enforce_db_clean_forgets_the_problem(handle, tunable, buffers, monkeypatch):
    """FIND_ENFORCE=DB_CLEAN drops the problem's perf-db trials before find runs."""
    _search(handle, tunable, buffers, Budget(3, None, None))
    monkeypatch.setenv("CONVSOLVE_FIND_ENFORCE", "DB_CLEAN")
    convsolve.find(handle, PROBLEM, **buffers)
    assert PerfDb().trials(handle.db_key, PROBLEM.key(), "tunable.Spin") == []


@pytest.mark.parametrize("recorded_ms, searched", [(1e9, False), (1e-9, True)])
def test_trust_verify_searches_again_only_when_the_winner_got_slower(
        handle, tunable, buffers, recorded_ms, searched):
    """TRUST_VERIFY re-times the recorded winner: within its record the hit stands (nothing is
    tuned); far slower than recorded, find tunes and benchmarks again."""
    FindDb().store(handle.db_key, PROBLEM.key(),
                   [Record("tunable.Spin", "tunable", recorded_ms, 0)])
    ranked = convsolve.find(handle, PROBLEM, **buffers, mode="TRUST_VERIFY")
    tried = PerfDb().trials(handle.db_key, PROBLEM.key(), "tunable.Spin")
    assert bool(tried) is searched
    assert (ranked[0].source == "benchmark") is searched


def test_a_half_tunable_solver_is_refused(tunable):
    """config_space without default_config is refused at load time, naming what is missing."""
    half = type("Half", (type(tunable),), {"name": "tunable.Half", "default_config": None,
                                           "__module__": type(tunable).__module__})
    assert "implements both config_space and default_config" in plugins.contract_refusal(half())


def test_winners_on_other_problems_are_timed_right_after_the_default(handle, tunable, buffers):
    """A search starts from the configs that won the solver's earlier searches on the device, so
    a second layer finds the fast config within two trials."""
    _search(handle, tunable, buffers, strategy="exhaustive")
    other = Problem.conv2d((2, 2, 6, 6), (4, 2, 1, 1))
    outcome = search(handle, other, tunable,
                     convsolve.Buffers(**device_buffers(handle, random_tensors(other))), None,
                     Budget(2, None, None), "random-local")
    assert [t.config for t in outcome.trials] == [tunable.default, FASTEST]
    assert outcome.best.config == FASTEST


@pytest.mark.parametrize("progress, terminal, drawn", [
    (False, True, False), ("auto", False, False), ("auto", True, True), (True, False, True)])
def test_a_search_draws_a_bar_only_where_asked(handle, tunable, buffers, monkeypatch, progress,
                                               terminal, drawn):
    """Library calls (PROGRESS False) never draw a bar, even on a terminal; "auto" draws one on
    a terminal only; True always: one step per config tried, the best time beside it."""
    stderr, bars = io.StringIO(), []
    stderr.isatty = lambda: terminal
    monkeypatch.setattr("sys.stderr", stderr)
    monkeypatch.setattr(search_module, "PROGRESS_DELAY_S", 0)
    monkeypatch.setattr(search_module, "PROGRESS",
                        contextvars.ContextVar("progress", default=progress))

    class Recorded(tqdm.tqdm):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            bars.append(self)
    monkeypatch.setattr(tqdm, "tqdm", Recorded)
    outcome = _search(handle, tunable, buffers, strategy="exhaustive")
    assert len(bars) == 1 and ("tune tunable.Spin" in stderr.getvalue()) is drawn
    if drawn:
        assert (bars[0].n, bars[0].total) == (len(outcome.trials), 8)
        assert f"best {outcome.best.time_ms:.4f} ms" in bars[0].postfix


def test_a_search_shorter_than_the_delay_draws_nothing(handle, tunable, buffers, monkeypatch):
    """A bar appears only once its search has run PROGRESS_DELAY_S: a short search, even asked
    for a bar on a terminal, writes nothing (nor does a new best time)."""
    stderr = io.StringIO()
    stderr.isatty = lambda: True
    monkeypatch.setattr("sys.stderr", stderr)
    monkeypatch.setattr(search_module, "PROGRESS_DELAY_S", 600)
    monkeypatch.setattr(search_module, "PROGRESS", contextvars.ContextVar("progress",
                                                                          default=True))
    outcome = _search(handle, tunable, buffers, strategy="exhaustive")
    assert outcome.best.config == FASTEST and stderr.getvalue() == ""


@pytest.mark.parametrize("scale", [1.0, 1e25, 1e-25])
def test_configs_are_checked_against_the_default_in_float32_or_float64(scale):
    """The check of a config's output against the default's is relative_error's float64 figure
    (to 1e-6 of it) whether float32 holds the squares or they overflow (1e25) or vanish
    (1e-25) there; equal outputs give 0."""
    rng = np.random.default_rng(0)
    default = (rng.standard_normal(4096) * scale).astype(np.float32)
    other = (default * np.float32(1.001) + np.float32(scale * 1e-4)).astype(np.float32)
    assert search_module._output_error(other, default) == pytest.approx(
        relative_error(other, default), rel=1e-6)
    assert search_module._output_error(default, default.copy()) == 0.0
