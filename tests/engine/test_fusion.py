"""Epilogue candidates in find, run, immediate mode and explain: fused and unfused compete, the
caller's output survives find, the workspace is exact, values are checked before OpenCL."""

import convsolve
import numpy as np
import pyopencl as cl
import pytest
from convsolve import Activation, Epilogue, Problem, SolverError, ValidationError, reference
from convsolve.cli.explain import explain
from convsolve.db.find_db import FindDb
from convsolve.engine.fusion import ALIGN, UNFUSED, candidates
from convsolve.testing import device_buffers, random_tensors, read_output
from epilogue_operands import epilogue_operands

BARE = Problem.conv2d((2, 3, 7, 6), (4, 3, 3, 3), padding=1)
ALL = Epilogue(True, True, True, "relu", True)


@pytest.fixture
def with_gemm(monkeypatch):
    """The naive solvers and the GEMM family, which fuse, and fake.Good, which does not."""
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,gemm,cs_plain")


def _device(handle, arrays):
    flags = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
    return {name: cl.Buffer(handle.context, flags, hostbuf=a) for name, a in arrays.items()}


def test_candidates_fused_and_unfused(with_gemm):
    """A fusing solver yields itself fused and '<name>/unfused'; a solver without the hook only
    itself, unfused; a bare problem gets the solvers themselves."""
    problem = BARE.with_epilogue(ALL)
    found = {c.name: c for c in candidates(problem)[0]}
    assert {"gemm.Im2ColGemm", "gemm.Im2ColGemm" + UNFUSED, "fake.Good"} <= set(found)
    assert found["gemm.Im2ColGemm"].fused == len(ALL.stages)
    assert found["fake.Good"].fused == 0 and "fake.Good" + UNFUSED not in found
    assert [s.name for s in candidates(BARE)[0]] == convsolve.applicable_solvers(BARE)


def test_composite_workspace_is_exact(handle, with_gemm):
    """An unfused candidate that must keep the output's prior contents reports its solver's
    workspace rounded up to ALIGN plus the output, and writes up to its last byte."""
    problem = BARE.with_epilogue(ALL)
    unfused = {c.name: c for c in candidates(problem)[0]}["gemm.Im2ColGemm" + UNFUSED]
    inner = convsolve.registry().get("gemm.Im2ColGemm").workspace(BARE)
    need = unfused.workspace(problem, handle)
    assert need == -(-inner // ALIGN) * ALIGN + problem.y.nbytes
    scratch = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, need)
    cl.enqueue_fill_buffer(handle.queue, scratch, np.uint8(0xA5), 0, need)
    host, arrays = random_tensors(problem), epilogue_operands(problem, 1)
    buffers = device_buffers(handle, host)
    convsolve.run(handle, problem, unfused.name, **buffers, scratch=scratch, alpha=0.5,
                  beta=0.25, **{n: b for n, b in _device(handle, arrays).items()})
    tail = np.empty(4, np.uint8)
    cl.enqueue_copy(handle.queue, tail, scratch, src_offset=need - 4)
    assert (tail != 0xA5).any()
    expected = reference.compute(problem, **host, **arrays, alpha=0.5, beta=0.25)
    assert reference.relative_error(read_output(handle, problem, buffers), expected) < 1e-5
    with pytest.raises(ValidationError, match="scratch"):
        convsolve.run(handle, problem, unfused.name, **buffers, alpha=0.5, beta=0.25,
                      scratch=cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, need - 4),
                      **_device(handle, arrays))


def test_find_keeps_the_callers_output_and_ranks_both(handle, with_gemm):
    """find with beta != 0 and z being y runs candidates on a copy (y keeps its contents), ranks
    fused and unfused candidates, records them under a key with the epilogue, and run (by
    family too) then computes the right output."""
    problem = BARE.with_epilogue(Epilogue(bias=True, residual=True, activation="elu",
                                          blend=True))
    host, arrays = random_tensors(problem), epilogue_operands(problem, 1)
    buffers, device = device_buffers(handle, host), _device(handle, arrays)
    values = {"alpha": -1.0, "beta": 0.5, "z_scale": 2.0, "activation": ("elu", 0.5)}
    found = convsolve.find(handle, problem, **buffers, bias=device["bias"], z=buffers["y"],
                           verify=True, **values)
    names = {s.solver for s in found}
    assert {"gemm.Im2ColGemm", "gemm.Im2ColGemm" + UNFUSED, "direct.NaiveFwd"} <= names
    assert np.array_equal(read_output(handle, problem, buffers), host["y"])
    records = FindDb().records(handle.db_key, problem.key())
    assert problem.key().endswith("-epi.bias.residual.elu.blend") and len(records) == len(found)
    convsolve.run(handle, problem, "gemm", **buffers, bias=device["bias"], z=buffers["y"],
                  **values)
    expected = reference.compute(problem, host["x"], host["w"], host["y"], bias=arrays["bias"],
                                 z=host["y"], **values)
    assert reference.relative_error(read_output(handle, problem, buffers), expected) < 1e-5


def test_immediate_and_explain_list_candidates(handle, with_gemm):
    """Immediate mode's fallback and explain's rows are the candidates, fused and unfused."""
    problem = BARE.with_epilogue(Epilogue(bias=True, activation="relu"))
    names = [s.solver for s in convsolve.get_solutions(handle, problem)]
    assert names.index("gemm.Im2ColGemm") < names.index("gemm.Im2ColGemm" + UNFUSED)
    assert "fake.Good" in names and "fake.Good" + UNFUSED not in names
    convsolve.compile_solution(handle, problem, "gemm.Im2ColGemm" + UNFUSED)
    rows = {row["solver"]: row for row in explain(handle, problem, {
        **device_buffers(handle, random_tensors(problem)),
        "bias": _device(handle, epilogue_operands(problem, 1))["bias"]})}
    assert rows["gemm.Im2ColGemm" + UNFUSED]["status"].startswith("rank")
    assert rows["direct.NaiveBwdData"]["status"] == "does not serve FORWARD"
    with pytest.raises(SolverError, match="no unfused variant"):
        convsolve.run(handle, problem, "fake.Good" + UNFUSED,
                      **device_buffers(handle, random_tensors(problem)),
                      bias=_device(handle, epilogue_operands(problem, 1))["bias"])


def test_values_are_checked_before_opencl(handle):
    """Each value that does not fit the problem's epilogue is a ValidationError naming it."""
    host = random_tensors(BARE)
    buffers = device_buffers(handle, host)
    bias = _device(handle, epilogue_operands(BARE, 1))["bias"]
    problem = BARE.with_epilogue(Epilogue(bias=True))
    cases = [(BARE, {"bias": bias}, "invalid bias=.*has no epilogue"),
             (BARE, {"alpha": 2.0}, "invalid alpha=2.0.*has no epilogue"),
             (problem, {}, "invalid bias=None.*needs it"),
             (problem, {"bias": bias, "beta": 1.0}, "invalid beta=1.0.*no blend"),
             (problem, {"bias": bias, "alpha": float("nan")}, "invalid alpha=nan"),
             (problem, {"bias": buffers["y"]}, "invalid bias=.*output"),
             (problem, {"bias": buffers["w"], "activation": "relu"}, "invalid activation="),
             (problem, {"bias": cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, 4)},
              "invalid bias buffer size=4"),
             (problem, {"bias": bias, "z": bias}, "invalid z=.*no residual")]
    for p, values, message in cases:
        for call in (convsolve.find, convsolve.run):
            args = (handle, p) if call is convsolve.find else (handle, p, "direct.NaiveFwd")
            with pytest.raises(ValidationError, match=message):
                call(*args, **buffers, **values)


def test_zero_batch_backward_weights_blends(handle):
    """A zero batch's weight gradient with an epilogue is beta * the prior dw (alpha * 0)."""
    problem = Problem.conv2d((0, 2, 5, 5), (3, 2, 3, 3), direction="wrw").with_epilogue(
        Epilogue(blend=True))
    prior = np.random.default_rng(0).uniform(-1, 1, problem.w.shape).astype(np.float32)
    w = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                  hostbuf=prior)
    cl.wait_for_events(convsolve.run(handle, problem, "direct.NaiveBwdWeights", x=None, w=w,
                                     y=None, alpha=3.0, beta=-2.0))
    out = np.empty_like(prior)
    cl.enqueue_copy(handle.queue, out, w)
    assert np.array_equal(out, -2.0 * prior)


def test_isolated_find_times_epilogue_candidates_in_the_worker(handle, with_gemm, monkeypatch):
    """Under CONVSOLVE_FIND_ISOLATION=process the worker times an epilogue problem's candidates,
    fused and unfused, with the caller's values; the caller's output survives."""
    monkeypatch.setenv("CONVSOLVE_FIND_ISOLATION", "process")
    problem = BARE.with_epilogue(Epilogue(bias=True, residual=True, activation="abs", blend=True))
    buffers = device_buffers(handle, random_tensors(problem))
    prior = read_output(handle, problem, buffers)
    bias = _device(handle, epilogue_operands(problem, 1))["bias"]
    found = convsolve.find(handle, problem, **buffers, bias=bias, z=buffers["y"], beta=0.5,
                           activation=Activation("abs"))
    names = {s.solver for s in found}
    assert {"gemm.Im2ColGemm", "gemm.Im2ColGemm" + UNFUSED} <= names, names
    assert all(s.workspace == next(c for c in candidates(problem)[0] if c.name == s.solver)
               .workspace(problem, handle) for s in found)
    assert np.array_equal(read_output(handle, problem, buffers), prior)


def test_exhaustive_find_tunes_the_bare_convolution(handle, with_gemm, monkeypatch):
    """exhaustive=True with an epilogue searches the configs of the bare convolution (its
    perf-db key has no epilogue), then ranks the candidates."""
    monkeypatch.setenv("CONVSOLVE_TUNING_BUDGET_CONFIGS", "2")
    problem = Problem.conv2d((2, 8, 5, 4), (6, 8, 1, 1)).with_epilogue(
        Epilogue(bias=True, activation="relu"))
    found = convsolve.find(handle, problem, **device_buffers(handle, random_tensors(problem)),
                           bias=_device(handle, epilogue_operands(problem, 1))["bias"], exhaustive=True)
    assert "gemm.Gemm1x1" in {s.solver for s in found}
    from convsolve.db.perf_db import PerfDb
    bare = problem.with_epilogue(None).key()
    assert PerfDb().trials(handle.db_key, bare, "gemm.Gemm1x1")
    assert not PerfDb().trials(handle.db_key, problem.key(), "gemm.Gemm1x1")


def test_composite_keeps_no_part_of_the_callers_scratch(handle, with_gemm):
    """An unfused candidate writing into scratch makes its sub-buffer for each call: the kept
    invoker holds no reference to a scratch the caller then releases (NVIDIA's OpenCL crashed
    releasing a kept sub-buffer after its parent, RELIABILITY.md)."""
    import sys
    problem = BARE.with_epilogue(ALL)
    unfused = {c.name: c for c in candidates(problem)[0]}["gemm.Im2ColGemm" + UNFUSED]
    scratch = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, unfused.workspace(problem, handle))
    buffers, before = device_buffers(handle, random_tensors(problem)), sys.getrefcount(scratch)
    convsolve.run(handle, problem, unfused.name, **buffers, scratch=scratch, beta=0.5,
                  **_device(handle, epilogue_operands(problem, 1)))
    handle.queue.finish()
    assert sys.getrefcount(scratch) == before
