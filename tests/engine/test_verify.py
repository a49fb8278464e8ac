"""Verified find and the numerics check: wrong or non-finite outputs are caught and named."""
import convsolve
import numpy as np
import pytest
from convsolve import NumericsError, Problem, find, run
from convsolve.db.find_db import FindDb
from convsolve.testing import device_buffers, random_tensors

SMALL = Problem.conv2d((2, 3, 7, 6), (4, 3, 3, 3), padding=((1, 0), (0, 1)))


@pytest.fixture
def hostile(monkeypatch):
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,cs_hostile")
    monkeypatch.setenv("CONVSOLVE_DISABLE_SOLVERS", "hostile.HangsBuilding")
    return convsolve.registry()


@pytest.mark.parametrize("how", ["argument", "variable"])
def test_verified_find_never_records_a_wrong_solver(handle, hostile, monkeypatch, caplog, how):
    """verify=True (or CONVSOLVE_FIND_VERIFY=1) drops a solver whose output is slightly wrong,
    which plain find ranks, and records it as failed."""
    caplog.set_level("INFO", logger="convsolve")
    buffers = device_buffers(handle, random_tensors(SMALL))
    if how == "variable":
        monkeypatch.setenv("CONVSOLVE_FIND_VERIFY", "1")
    ranked = find(handle, SMALL, **buffers, mode="NORMAL",
                  verify=True if how == "argument" else None)
    assert [s.solver for s in ranked] == ["direct.NaiveFwd"]
    assert "skip 'hostile.SlightlyWrong': wrong result: relative error" in caplog.text
    failure = {r.solver: r.failure for r in FindDb().lookup(handle.db_key, SMALL.key())}
    assert failure["hostile.SlightlyWrong"].startswith("wrong result")


@pytest.mark.parametrize("direction", list(convsolve.Direction))
def test_verification_samples_large_outputs_without_false_alarms(handle, direction):
    """On outputs larger than VERIFY_SAMPLES, sampled checking passes an honest solver."""
    problem = Problem.conv2d((2, 8, 19, 17), (32, 4, 3, 3), stride=(2, 1), padding=1,
                             groups=2, direction=direction)   # every output > VERIFY_SAMPLES
    buffers = device_buffers(handle, random_tensors(problem))
    assert find(handle, problem, **buffers, mode="NORMAL", verify=True)


def test_numerics_check_names_tensor_and_solver(handle, hostile, monkeypatch, caplog):
    """CONVSOLVE_CHECK_NUMERICS=1 warns about NaN in an input and in an output; 2 raises."""
    host = random_tensors(SMALL)
    host["x"].flat[3] = np.nan
    buffers = device_buffers(handle, host)
    monkeypatch.setenv("CONVSOLVE_CHECK_NUMERICS", "1")
    run(handle, SMALL, "direct.NaiveFwd", **buffers)
    assert f"numerics: input 'x' of {SMALL.key()} holds 1 NaN, 0 inf (before 'direct.NaiveFwd')" \
        in caplog.text
    clean = device_buffers(handle, random_tensors(SMALL))
    monkeypatch.setenv("CONVSOLVE_CHECK_NUMERICS", "2")
    with pytest.raises(NumericsError, match="output 'y' .* holds 1 NaN, 0 inf .*hostile.WritesNan"):
        run(handle, SMALL, "hostile.WritesNan", **clean)
    monkeypatch.setenv("CONVSOLVE_CHECK_NUMERICS", "off")
    with pytest.raises(convsolve.ValidationError, match="CONVSOLVE_CHECK_NUMERICS"):
        run(handle, SMALL, "direct.NaiveFwd", **clean)
