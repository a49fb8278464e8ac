"""Composite layout candidates in find, run, immediate mode and explain: a solver serving
channels-first tensors only runs a channels-last problem on channels-first copies in scratch
(`<name>/nchw`), matches the reference in every direction and rank, and reports its workspace
exactly."""

import sys

import convsolve
import pyopencl as cl
import pytest
from convsolve import Direction, Problem, SolverError, reference
from convsolve.arith import ALIGN, round_up
from convsolve.cli.explain import explain, explain_text
from convsolve.db.find_db import FindDb
from convsolve.db.perf_db import PerfDb
from convsolve.engine.fusion import candidates
from convsolve.engine.layouts import NCHW, channels_first
from convsolve.solvers.calls import workspace_of
from convsolve.testing import (
    check_problem,
    device_buffers,
    expected_output,
    random_tensors,
    read_output,
)

#: Small odd sizes, groups, a stride and asymmetric padding, every tensor NHWC.
NHWC = Problem.conv2d((3, 4, 7, 5), (6, 2, 3, 3), stride=(2, 1), padding=((1, 0), (0, 2)),
                      groups=2, layout="NHWC")
IMPLICIT = {Direction.FORWARD: "implicit_gemm.Fwd", Direction.BACKWARD_DATA:
            "implicit_gemm.BwdData", Direction.BACKWARD_WEIGHTS: "implicit_gemm.Wrw"}
NAIVE = {Direction.FORWARD: "direct.NaiveFwd", Direction.BACKWARD_DATA: "direct.NaiveBwdData",
         Direction.BACKWARD_WEIGHTS: "direct.NaiveBwdWeights"}


@pytest.fixture
def with_gemm(monkeypatch):
    """The naive solvers and the implicit GEMM family (every layout natively), the GEMM family
    (channels-first only, but gemm.Gemm1x1 NHWC too)."""
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,gemm,implicit_gemm")


def _exact_workspace(candidate, problem, handle):
    """The inner solver's workspace on the channels-first problem, then each channels-last
    tensor's copy, x, w, y in turn, each at a multiple of ALIGN."""
    end = workspace_of(candidate.inner, channels_first(problem), handle)
    for desc in (problem.x, problem.w, problem.y):
        if desc.channels_last:
            end = round_up(end, ALIGN) + desc.nbytes
    return end


@pytest.mark.parametrize("direction", list(Direction), ids=lambda d: d.name)
def test_find_ranks_composites_matching_the_reference(handle, with_gemm, direction):
    """find times the composites of the solvers refusing NHWC beside the solvers serving it
    (the naive and implicit GEMM ones, which get no composite), records them under their names,
    and each (run by name) matches the reference; each composite's workspace is exact, guarded
    and written to its end (check_problem)."""
    problem = NHWC.with_direction(direction)
    host = random_tensors(problem)
    buffers = device_buffers(handle, host)
    found = {s.solver for s in convsolve.find(handle, problem, **buffers, mode="NORMAL",
                                              verify=True)}
    composites, native = {"gemm.Im2ColGemm" + NCHW}, {NAIVE[direction], IMPLICIT[direction]}
    assert composites | native <= found
    assert "gemm.Im2ColGemm" not in found and not {name + NCHW for name in native} & found
    assert found <= {r.solver for r in FindDb().records(handle.db_key, problem.key())}
    expected = expected_output(problem, host)
    for name in found - {NAIVE[direction]}:
        convsolve.run(handle, problem, name, **buffers)
        assert reference.relative_error(read_output(handle, problem, buffers), expected) < 1e-5
    for candidate in candidates(problem)[0]:
        if candidate.name in composites:
            assert candidate.workspace(problem, handle) == _exact_workspace(
                candidate, problem, handle)
            assert check_problem(candidate, handle, problem) == []


def test_winograd_composite_for_a_3x3_stride_1_problem(handle, monkeypatch):
    """A 3x3 stride-1 NHWC problem gets winograd.F2x3/nchw, which find ranks and run follows."""
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,winograd")
    monkeypatch.setenv("CONVSOLVE_DISABLE_SOLVERS", "winograd.F4x3,winograd.F6x3")
    problem = Problem.conv2d((2, 3, 6, 7), (5, 3, 3, 3), padding=1, layout="NHWC")
    host = random_tensors(problem)
    buffers = device_buffers(handle, host)
    found = [s.solver for s in convsolve.find(handle, problem, **buffers, mode="NORMAL")]
    assert "winograd.F2x3" + NCHW in found
    convsolve.run(handle, problem, "winograd", **buffers)   # the family's best: the composite
    error = reference.relative_error(read_output(handle, problem, buffers),
                                     expected_output(problem, host))
    assert error < convsolve.registry().get("winograd.F2x3").tolerance


@pytest.mark.parametrize("layout, direction", [
    ({"x": "NHWC", "w": "NCHW", "y": "NHWC"}, Direction.FORWARD),
    ({"w": "NHWC"}, Direction.BACKWARD_WEIGHTS),
    ({"y": "NHWC"}, Direction.BACKWARD_DATA)], ids=["x-y-fwd", "w-wrw", "y-bwd"])
def test_mixed_layouts_copy_only_the_channels_last_tensors(handle, with_gemm, layout,
                                                           direction):
    """With some tensors channels-first, only the channels-last ones are copied (the output
    transposed out when it is one); the result and the workspace are exact."""
    problem = Problem.conv2d((2, 4, 5, 6), (4, 2, 3, 1), stride=(1, 2), padding=(0, 1),
                             groups=2, layout=layout).with_direction(direction)
    composite = {c.name: c for c in candidates(problem)[0]}["gemm.Im2ColGemm" + NCHW]
    copied = [name for name in "xwy" if getattr(problem, name).channels_last]
    assert composite.workspace(problem, handle) == _exact_workspace(composite, problem, handle)
    assert composite.describe(problem).endswith(f"copies of {', '.join(copied)} (transposes "
                                                "timed with it)")
    assert check_problem(composite, handle, problem) == []


@pytest.mark.parametrize("problem, name", [
    (Problem.conv1d((2, 3, 9), (4, 3, 2), stride=2, padding=((1, 0),), layout="NWC"), "first.Fwd"),
    (Problem.conv3d((2, 4, 3, 4, 5), (2, 2, 2, 1, 3), padding=((0, 1), (0, 0), (1, 1)), groups=2,
                    layout="NDHWC").with_direction("bwd"), "first.BwdData"),
    (Problem.conv3d((1, 2, 3, 3, 4), (3, 2, 1, 2, 2), stride=(1, 2, 1),
                    layout={"x": "NDHWC", "w": "NDHWC"}).with_direction("wrw"),
     "first.BwdWeights")], ids=["1d-fwd", "3d-bwd", "3d-wrw-mixed"])
def test_other_ranks(handle, monkeypatch, problem, name):
    """A solver claiming ranks 1 and 3 in channels-first layouts only gets a composite for
    NWC and NDHWC problems, exact in result and workspace; the naive one serves them itself."""
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,cs_first")
    found = {c.name: c for c in candidates(problem)[0]}
    assert name + NCHW in found and NAIVE[problem.direction] + NCHW not in found
    assert check_problem(found[name + NCHW], handle, problem) == []


def test_no_composite_where_a_solver_serves_the_layout(with_gemm):
    """A 1x1 NHWC problem offers gemm.Gemm1x1 itself and no gemm.Gemm1x1/nchw; channels-first
    problems and zero batches get no composites."""
    pointwise = Problem.conv2d((2, 6, 5, 3), (4, 6, 1, 1), layout="NHWC")
    names = [c.name for c in candidates(pointwise)[0]]
    assert "gemm.Gemm1x1" in names and "gemm.Gemm1x1" + NCHW not in names
    assert "gemm.Im2ColGemm" + NCHW in names
    assert not any("/" in c.name for c in candidates(channels_first(NHWC))[0])
    empty = Problem.conv2d((0, 4, 7, 5), (6, 2, 3, 3), groups=2, layout="NHWC")
    assert not any("/" in c.name for c in candidates(empty)[0])


def test_run_immediate_and_explain_name_the_composite(handle, with_gemm):
    """run and compile_solution take a composite by name; the inner solver's name alone is
    refused, saying which composite serves it, and a native solver has no composite;
    immediate mode's fallback lists composites; explain shows each after its solver, saying
    what it runs."""
    problem, name = NHWC, "gemm.Im2ColGemm" + NCHW
    host = random_tensors(problem)
    buffers = device_buffers(handle, host)
    convsolve.compile_solution(handle, problem, name)
    convsolve.run(handle, problem, name, **buffers)
    assert reference.relative_error(read_output(handle, problem, buffers),
                                    expected_output(problem, host)) < 1e-5
    with pytest.raises(SolverError, match="does not serve layout NHWC of x .*/nchw runs it"):
        convsolve.run(handle, problem, "gemm.Im2ColGemm", **buffers)
    with pytest.raises(SolverError, match="serves these layouts itself: no composite"):
        convsolve.run(handle, problem, "direct.NaiveFwd" + NCHW, **buffers)
    assert name in [s.solver for s in convsolve.get_solutions(handle, problem)]
    rows = explain(handle, problem)
    order = [row["solver"] for row in rows]
    assert order.index(name) == order.index("gemm.Im2ColGemm") + 1
    status = {row["solver"]: row["status"] for row in rows}
    assert status[name] == ("applicable (not run)\ncomposite: gemm.Im2ColGemm on channels-first "
                            "copies of x, w, y (transposes timed with it)")
    assert status["gemm.Im2ColGemm"].endswith(f"{name} runs it on channels-first copies")
    assert f"    {name}: composite: gemm.Im2ColGemm" in explain_text(rows)


def test_isolated_and_exhaustive_find_time_composites(handle, with_gemm, monkeypatch):
    """The find worker (CONVSOLVE_FIND_ISOLATION=process) resolves composites by name, and an
    exhaustive find ranks them too, their solvers searched on the channels-first problem (whose
    perf-db entry the composite builds), not on the channels-last key."""
    monkeypatch.setenv("CONVSOLVE_TUNING_BUDGET_CONFIGS", "2")
    problem = Problem.conv2d((2, 4, 5, 3), (4, 4, 1, 3), padding=(0, 1), layout="NHWC")
    buffers = device_buffers(handle, random_tensors(problem))
    found = convsolve.find(handle, problem, **buffers, exhaustive=True)
    assert "gemm.Im2ColGemm" + NCHW in {s.solver for s in found}
    perf_db = PerfDb()
    assert perf_db.tuned(handle.db_key, channels_first(problem).key(), "gemm.Im2ColGemm")
    assert perf_db.tuned(handle.db_key, problem.key(), "gemm.Im2ColGemm") is None
    monkeypatch.setenv("CONVSOLVE_FIND_ISOLATION", "process")
    found = convsolve.find(handle, problem.with_direction("bwd"), **buffers, mode="NORMAL")
    assert "gemm.Im2ColGemm" + NCHW in {s.solver for s in found}


def test_composite_keeps_no_part_of_the_callers_scratch(handle, with_gemm):
    """A composite makes its sub-buffers for each call: its kept invoker holds no reference to
    a scratch the caller then releases (RELIABILITY.md: NVIDIA's OpenCL crashed releasing a
    kept sub-buffer after its parent)."""
    composite = {c.name: c for c in candidates(NHWC)[0]}["gemm.Im2ColGemm" + NCHW]
    scratch = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE,
                        composite.workspace(NHWC, handle))
    buffers, before = device_buffers(handle, random_tensors(NHWC)), sys.getrefcount(scratch)
    convsolve.run(handle, NHWC, composite.name, **buffers, scratch=scratch)
    handle.queue.finish()
    assert sys.getrefcount(scratch) == before


@pytest.mark.parametrize("layout", ["NHWC", {"x": "NHWC", "y": "NHWC"}], ids=["w-last", "w-first"])
def test_a_composite_packs_its_solvers_weights(handle, monkeypatch, layout):
    """With constant weights, winograd.F2x3/nchw packs through Winograd's packing (the
    transformed filter), from a channels-first copy of w made in the packed buffer when w is
    channels-last: the results match the reference, and a new weights version repacks."""
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,winograd")
    problem = Problem.conv2d((2, 3, 6, 7), (5, 3, 3, 3), padding=1, layout=layout)
    name = "winograd.F2x3" + NCHW
    composite = {c.name: c for c in candidates(problem)[0]}[name]
    packing = composite.build_packing(problem, handle)
    assert packing is not None and packing.nbytes >= (problem.w.nbytes if problem.w.channels_last
                                                      else 1)
    tolerance = convsolve.registry().get("winograd.F2x3").tolerance
    handle.weights_cache.clear()
    host = random_tensors(problem, 1)
    buffers = device_buffers(handle, host)
    expected = expected_output(problem, host)
    for version, seed in ((0, 1), (0, 2), (1, 2)):   # w rewritten, then its version bumped
        cl.enqueue_copy(handle.queue, buffers["w"], random_tensors(problem, seed)["w"])
        convsolve.run(handle, problem, name, **buffers, constant_weights=True,
                      weights_version=version)
        if version:   # repacked from the new weights
            expected = expected_output(problem, dict(host, w=random_tensors(problem, seed)["w"]))
        assert reference.relative_error(read_output(handle, problem, buffers),
                                        expected) < tolerance
    assert len(handle.weights_cache) == 1
