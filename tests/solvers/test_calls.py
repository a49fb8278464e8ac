"""Hook results are held to the contract: a solver that raises or answers nonsense in any hook,
hangs while building, or writes NaN is excluded with its reason, and find answers from the rest."""
import convsolve
import pluggy
import pytest
from convsolve import Problem, find, hookspecs
from convsolve.db.find_db import FindDb
from convsolve.errors import ContractError
from convsolve.solvers.calls import events_of, fused_stages_of, fusing_hook, workspace_of, wti_of
from convsolve.testing import device_buffers, random_tensors

PROBLEM = Problem.conv2d((2, 3, 7, 6), (4, 3, 3, 3), padding=((1, 0), (0, 1)))

EXCLUDED = {
    "hostile.RaisesIn_is_applicable": "is_applicable raised RuntimeError('planted failure",
    "hostile.RaisesIn_get_wti": "get_wti() raised RuntimeError('planted failure in get_wti')",
    "hostile.RaisesIn_workspace": "workspace() raised RuntimeError('planted failure",
    "hostile.RaisesIn_build_invoker": "failed to build: build_invoker() raised RuntimeError(",
    "hostile.NegativeWorkspace": "workspace() returned -4, not bytes >= 0",
    "hostile.NanWti": "get_wti() returned nan, not in (0, 1] or negative",
    "hostile.NotCallable": "build_invoker() returned 42, not an invoker",
    "hostile.ReturnsNone": "its invoker returned None, not a non-empty list of pyopencl events",
    "hostile.HangsBuilding": "failed to build: did not return within 0.5 s",
    "hostile.WritesNan": "wrote 1 NaN, 0 inf from finite inputs",
}


@pytest.fixture
def hostile(monkeypatch):
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,cs_hostile")
    monkeypatch.setenv("CONVSOLVE_FIND_BUILD_TIMEOUT_S", "0.5")
    yield convsolve.registry()
    import cs_hostile
    cs_hostile.RELEASE.set()   # let the hung build's thread end


def test_hostile_solvers_are_excluded_with_reasons(handle, hostile, caplog):
    """find answers from the honest solvers; each hostile one is skipped, logged and recorded;
    the build that never returned is refused at once afterwards."""
    import cs_faulty
    for file, kernel in ((cs_faulty.NAIVE, "naive_fwd"), (cs_faulty.FAULTS, "nudge")):
        handle.build(file, kernel)   # built before the 0.5 s limit applies to real builds
    caplog.set_level("INFO", logger="convsolve")
    buffers = device_buffers(handle, random_tensors(PROBLEM))
    ranked = {s.solver for s in find(handle, PROBLEM, **buffers, mode="NORMAL")}
    assert ranked == {"direct.NaiveFwd", "hostile.SlightlyWrong"}   # wrong, but only verify sees it
    for name, reason in EXCLUDED.items():
        assert f"{name!r}" in caplog.text and reason in caplog.text, name
    recorded = {r.solver: r.failure for r in FindDb().lookup(handle.db_key, PROBLEM.key())}
    for name, reason in EXCLUDED.items():
        if name != "hostile.RaisesIn_is_applicable":   # never a candidate, so nothing to record
            assert reason in recorded[name], name
    with pytest.raises(convsolve.BuildError, match="its build never returned"):
        convsolve.run(handle, PROBLEM, "hostile.HangsBuilding", **buffers)


def test_fallback_ranking_skips_contract_breakers(handle, hostile):
    """Immediate mode's WTI ranking leaves out solvers whose get_wti/workspace break the contract."""
    names = [s.solver for s in convsolve.get_solutions(handle, PROBLEM)]
    assert "direct.NaiveFwd" in names
    assert not {"hostile.RaisesIn_get_wti", "hostile.RaisesIn_workspace",
                "hostile.NegativeWorkspace", "hostile.NanWti"} & set(names)


@pytest.mark.parametrize("value", [True, 1.5, "8", -1])
def test_workspace_must_be_bytes(value):
    """workspace() answers of the wrong type or sign are PluginErrors naming the solver."""
    solver = type("S", (), {"name": "x.S", "workspace": lambda self, problem: value})()
    with pytest.raises(ContractError, match=r"'x.S': workspace\(\) returned"):
        workspace_of(solver, PROBLEM, None)


@pytest.mark.parametrize("value, ok", [(0.5, True), (-1.0, True), (1, True), (0.0, False),
                                       (1.5, False), (float("inf"), False), ("high", False)])
def test_wti_range(value, ok):
    """WTI is in (0, 1] or negative; anything else is refused."""
    solver = type("S", (), {"name": "x.S", "get_wti": lambda self, p: value})()
    if ok:
        assert wti_of(solver, PROBLEM) == float(value)
    else:
        with pytest.raises(ContractError, match="get_wti"):
            wti_of(solver, PROBLEM)


def test_invoker_must_return_events():
    """An invoker that returns no events, or something else, is refused."""
    for value in ([], None, [1], "event"):
        with pytest.raises(ContractError, match="not a non-empty list of pyopencl events"):
            events_of("x.S", value)


class _Fusing22:
    """A 2.2 solver: it fuses through the hook's old name, fused_epilogue."""

    name, family, directions, dynamic = "old.Fusing", "old", (convsolve.Direction.FORWARD,), True

    @convsolve.hookimpl
    def is_applicable(self, problem):
        return True

    @convsolve.hookimpl
    def get_wti(self, problem):
        return 0.5

    @convsolve.hookimpl
    def workspace(self, problem):
        return 0

    @convsolve.hookimpl
    def build_invoker(self, problem, handle):
        raise NotImplementedError

    @convsolve.hookimpl
    def fused_epilogue(self, problem):
        return 1


def test_the_2_2_hook_name_is_served_with_a_deprecation_warning():
    """A solver implementing fused_epilogue (2.2) registers with a DeprecationWarning naming
    fused_stages, and the core still asks it how many stages it fuses."""
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    with pytest.warns(DeprecationWarning, match="fused_stages"):
        manager.register(_Fusing22(), name="old.Fusing")
    problem = Problem.conv2d((1, 2, 4, 4), (2, 2, 1, 1)).with_epilogue(
        convsolve.Epilogue(bias=True, activation="relu"))
    assert fusing_hook(_Fusing22()) == "fused_epilogue"
    assert fused_stages_of(_Fusing22(), problem) == 1


def test_buffers_epilogue_is_the_deprecated_name_of_epilogue_args(handle):
    """Buffers.epilogue and with_epilogue (2.2's names) warn and give epilogue_args's values."""
    problem = Problem.conv2d((1, 2, 4, 4), (2, 2, 1, 1))
    buffers = convsolve.Buffers(**device_buffers(handle, random_tensors(problem)))
    args = convsolve.EpilogueArgs(alpha=2.0)
    with pytest.warns(DeprecationWarning, match="with_epilogue_args"):
        carrying = buffers.with_epilogue(args)
    assert carrying.epilogue_args is args
    with pytest.warns(DeprecationWarning, match="epilogue_args"):
        assert carrying.epilogue is args


def test_workspace_may_take_the_handle():
    """Solver API 2.6: a workspace hook that declares ``handle`` is given the one it runs on."""
    seen = []
    solver = type("S", (), {"name": "x.S", "workspace":
                            lambda self, problem, handle: seen.append(handle) or 8})()
    assert workspace_of(solver, PROBLEM, "the handle") == 8
    assert seen == ["the handle"]
