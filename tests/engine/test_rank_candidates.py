"""Rank candidates in find, run and explain: a solver serving 2-D problems only runs a 1-D
problem as the 2-D problem of height 1 with the same memory (`<name>/2d`), matches the reference
in every direction, and reports its solver's workspace of the 2-D view."""

import convsolve
import numpy as np
import pytest
from convsolve import Direction, Problem, SolverError, reference
from convsolve.cli.explain import explain
from convsolve.db.find_db import FindDb
from convsolve.db.perf_db import PerfDb
from convsolve.engine.fusion import candidates
from convsolve.engine.ranks import AS_2D, RANK_WTI, as_2d
from convsolve.solvers.calls import workspace_of, wti_of
from convsolve.testing import (
    check_problem,
    device_buffers,
    expected_output,
    random_tensors,
    read_output,
)

#: Odd length, groups, a stride, a dilation and asymmetric padding.
NCW = Problem.conv1d((3, 4, 23), (6, 2, 5), stride=2, padding=((2, 1),), dilation=2, groups=2)
#: A solver of every direction that serves 2-D problems only.
FFT = "fft.Fft2d"


@pytest.fixture
def with_fft(monkeypatch):
    """The naive solvers (every rank natively), the GEMM family (ranks 1 to 3) and the FFT family
    (2-D only)."""
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,gemm,fft")


def test_as_2d_keeps_the_memory():
    """as_2d: NCW becomes NCHW and NWC NHWC of height 1 (the same bytes in the same order), stride,
    dilation 1 and no padding along the height; 2-D and 3-D problems are themselves."""
    problem = Problem.conv1d((2, 6, 17), (8, 3, 5), 2, ((2, 1),), 3, 2, "bwd",
                             layout={"x": "NWC", "w": "NCW", "y": "NWC"})
    flat = as_2d(problem)
    assert flat.key() == ("bwd-n2-c6-h1-w17-k8-y1-x5-p0.0-q2.1-u1-v2-l1-j3-g2-float32-"
                          "NHWC.NCHW.NHWC")
    assert [t.nbytes for t in (flat.x, flat.w, flat.y)] == [
        t.nbytes for t in (problem.x, problem.w, problem.y)]
    square = Problem.conv2d((1, 2, 3, 3), (2, 2, 1, 1))
    assert as_2d(square) is square
    cube = Problem.conv3d((1, 2, 3, 3, 3), (2, 2, 1, 1, 1))
    assert as_2d(cube) is cube


def candidate_tolerance():
    """What the FFT solver is held to against the float64 reference."""
    return convsolve.registry().get(FFT).tolerance


@pytest.mark.parametrize("direction", list(Direction), ids=lambda d: d.name)
def test_find_ranks_rank_candidates_matching_the_reference(handle, with_fft, direction):
    """find times the FFT on the 1-D problem's 2-D view beside the native 1-D solvers,
    records it under `<name>/2d`, and run by name matches the reference; its workspace is its
    solver's of the 2-D view (exact: check_problem), its WTI its solver's times RANK_WTI."""
    problem = NCW.with_direction(direction)
    host = random_tensors(problem)
    buffers = device_buffers(handle, host)
    found = {s.solver for s in convsolve.find(handle, problem, **buffers, mode="NORMAL",
                                              verify=True)}
    name = FFT + AS_2D
    assert name in found and "gemm.Im2ColGemm" in found and "gemm.Im2ColGemm" + AS_2D not in found
    assert found <= {r.solver for r in FindDb().records(handle.db_key, problem.key())}
    convsolve.run(handle, problem, name, **buffers)
    assert reference.relative_error(read_output(handle, problem, buffers),
                                    expected_output(problem, host)) < candidate_tolerance()
    candidate = {c.name: c for c in candidates(problem)[0]}[name]
    flat = as_2d(problem)
    assert candidate.workspace(problem, handle) == workspace_of(candidate.inner, flat, handle)
    assert wti_of(candidate, problem) == pytest.approx(wti_of(candidate.inner, flat) * RANK_WTI)
    assert check_problem(candidate, handle, problem) == []


def test_no_rank_candidate_where_a_solver_serves_the_rank(with_fft):
    """Solvers serving rank 1 get none, 2-D and 3-D problems none at all."""
    names = [c.name for c in candidates(NCW)[0]]
    assert FFT + AS_2D in names and "direct.NaiveFwd" + AS_2D not in names
    assert not any(n.endswith(AS_2D) for n in names if n.startswith("gemm."))
    for other in (as_2d(NCW), Problem.conv3d((1, 2, 3, 4, 5), (2, 2, 1, 3, 3))):
        assert not any(c.name.endswith(AS_2D) for c in candidates(other)[0])


def test_run_and_explain_name_the_rank_candidate(handle, with_fft):
    """run takes the candidate by name; the solver's own name is refused, saying which
    candidate serves it, and a solver serving the rank has no 2-D view; explain shows the
    candidate after its solver, saying what it runs."""
    problem, name = NCW, FFT + AS_2D
    buffers = device_buffers(handle, random_tensors(problem))
    with pytest.raises(SolverError, match=r"does not serve spatial rank 1 .*/2d runs it"):
        convsolve.run(handle, problem, FFT, **buffers)
    with pytest.raises(SolverError, match="serves this rank itself: no 2-D view"):
        convsolve.run(handle, problem, "direct.NaiveFwd" + AS_2D, **buffers)
    rows = explain(handle, problem)
    order = [row["solver"] for row in rows]
    assert order.index(name) == order.index(FFT) + 1
    status = {row["solver"]: row["status"] for row in rows}
    assert status[name] == (f"applicable (not run)\ncomposite: {FFT} on the 1-D problem as 2-D, "
                            "height 1 (no copy)")


def test_applicable_solvers_names_every_candidate(with_fft):
    """applicable_solvers lists what find considers: the rank candidates of a 1-D problem and
    the composites of a channels-last one, each after the solvers."""
    names = convsolve.applicable_solvers(NCW)
    assert names.index(FFT + AS_2D) > names.index("gemm.Im2ColGemm")
    channels_last = Problem.conv2d((1, 4, 5, 5), (4, 4, 3, 3), layout="NHWC")
    assert "gemm.Im2ColGemm/nchw" in convsolve.applicable_solvers(channels_last)


def test_a_rank_candidate_with_an_epilogue(handle, with_fft):
    """A 1-D problem with bias and relu: the FFT's 2-D view is an epilogue candidate like any
    solver (fused as far as the FFT fuses, and unfused), and its output matches the reference
    through the numpy API."""
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((2, 4, 23), np.float32), rng.standard_normal((6, 2, 5), np.float32)
    bias = rng.standard_normal(6, np.float32)
    expected = np.maximum(convsolve.conv1d(x, w, 2, ((2, 1),), 2, 2, solver="direct.NaiveFwd")
                          + bias[:, None], 0)
    problem = NCW.with_epilogue(convsolve.Epilogue(bias=True, activation="relu"))
    assert FFT + AS_2D in convsolve.applicable_solvers(problem)
    found = convsolve.conv1d(x, w, 2, ((2, 1),), 2, 2, bias=bias, activation="relu",
                             solver=FFT + AS_2D)
    assert reference.relative_error(found, expected) < candidate_tolerance()


def test_exhaustive_find_tunes_the_solver_on_the_2d_view(handle, with_fft, monkeypatch):
    """An exhaustive find of a 1-D problem searches a rank candidate's solver on the 2-D view
    (the perf-db entry its invoker takes), as it searches the GEMM family on the 1-D key."""
    monkeypatch.setenv("CONVSOLVE_TUNING_BUDGET_CONFIGS", "2")
    buffers = device_buffers(handle, random_tensors(NCW))
    found = {s.solver for s in convsolve.find(handle, NCW, **buffers, exhaustive=True)}
    assert FFT + AS_2D in found
    tuned = [key for key in (as_2d(NCW).key(), NCW.key())
             if PerfDb().tuned(handle.db_key, key, FFT) is not None]
    assert tuned == [as_2d(NCW).key()]
    assert PerfDb().tuned(handle.db_key, NCW.key(), "gemm.Im2ColGemm") is not None
