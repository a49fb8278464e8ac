"""Builds ahead: a tune job's search and find hand their builds to BUILD_AHEAD before building
them; a timing worker sets it only on drivers whose binaries convsolve caches, and the compile
workers of its device kind build them."""
import pytest
from convsolve.db.perf_db import PerfDb
from convsolve.engine.parallel import BUILD_AHEAD
from convsolve.problem import Problem
from convsolve.scale import InProcess, drive, job, workers
from convsolve.solvers import registry as plugins
from convsolve.solvers.calls import default_config_of
from convsolve.tuning import config_key

TUNE = "convsolve.cli.tune:tune_job"
PROBLEM = Problem.conv2d((1, 2, 5, 4), (3, 2, 3, 3), padding=1)


@pytest.fixture
def tunable(monkeypatch):
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,cs_tunable")
    plugins.reset()


def _tune_job(handle, retune=False):
    return job(TUNE, PROBLEM, handle.db_key, "p", [("retune", retune)], budget=[3, 8.0, 8],
               strategy="exhaustive")


def test_search_and_find_hand_every_build_ahead_first(tunable, handle):
    """Every config the tune search timed but its default (built first where the search runs:
    the programs its configs share are then in the cache) was handed ahead, the rest of the
    budget of 3 in one round, none twice; and so were find's candidates (one build of each
    solver)."""
    handed = []
    token = BUILD_AHEAD.set(handed.append)
    try:
        drive(InProcess(handle), [_tune_job(handle)], quiet=True)
    finally:
        BUILD_AHEAD.reset(token)
    timed = {config_key(t.config) for t in PerfDb().trials(handle.db_key, PROBLEM.key(),
                                                            "tunable.Spin")}
    rounds = [[(name, key, config_key(config)) for name, key, config in builds]
              for builds in handed]
    spin = {c for round_ in rounds for name, key, c in round_
            if name == "tunable.Spin" and key == PROBLEM.key()}
    default = config_key(default_config_of(plugins.registry().get("tunable.Spin"), PROBLEM, handle))
    assert len(timed) >= 3 and timed - spin == {default}
    searches = [[c for _, _, c in round_] for round_ in rounds
                if {name for name, _, _ in round_} == {"tunable.Spin"}]   # not find's rounds
    assert len(searches[0]) == 2 and sum(map(len, searches)) == len(set().union(*searches))
    assert {"direct.NaiveFwd", "tunable.Spin"} in [{name for name, _, _ in round_}
                                                    for round_ in rounds]


def test_a_timing_worker_builds_ahead_only_where_binaries_are_cached(tunable, handle,
                                                                     monkeypatch):
    """remote() sets BUILD_AHEAD to the compile workers of the job's device kind where
    caches_binaries says so (NVIDIA's driver), leaves it unset on PoCL, and resets it after."""
    calls = []
    monkeypatch.setattr(workers, "_worker_handle", lambda: handle)
    monkeypatch.setattr(workers, "_build_on_compile_workers",
                        lambda kind, builds: calls.append((kind, builds)))
    monkeypatch.setattr(workers, "caches_binaries", lambda platform: False)
    assert not workers.remote(_tune_job(handle), ()).error
    assert calls == []
    monkeypatch.setattr(workers, "caches_binaries", lambda platform: True)
    assert not workers.remote(_tune_job(handle, retune=True), ()).error
    assert calls and {kind for kind, _ in calls} == {handle.db_key}
    assert BUILD_AHEAD.get() is None


def test_compile_workers_build_what_a_task_hands_them(tunable, handle, monkeypatch):
    """From inside a task, _build_on_compile_workers builds each config on a worker with the
    kind's compile resource and says how many built; one that does not build counts no more."""
    distributed = pytest.importorskip("distributed")
    monkeypatch.setattr(workers, "_worker_handle", lambda: handle)
    kind = handle.db_key
    builds = [("direct.NaiveFwd", PROBLEM.key(), None), ("no.Such", PROBLEM.key(), None)]
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=None,
                                  resources={workers.COMPILE + kind: 1}) as cluster, \
            distributed.Client(cluster) as client:
        assert client.submit(workers._build_on_compile_workers, kind, builds).result() == 1
