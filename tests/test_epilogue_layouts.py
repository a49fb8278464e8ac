"""Epilogues in every spatial rank and layout (issue 31): the bias and scale per output channel,
z and the prior output in y's layout, fused (gemm.Im2ColGemm, channels-first) and unfused (the
core's pass, composite layout candidates included) alike, through find and run and through the
numpy API; a bias of the wrong length refused as in NCHW."""
import convsolve
import numpy as np
import pyopencl as cl
import pytest
from convsolve import Epilogue, Problem, ValidationError, reference
from convsolve.engine.fusion import UNFUSED, candidates
from convsolve.engine.layouts import NCHW
from convsolve.testing import device_buffers, random_tensors, read_output
from epilogue_operands import epilogue_operands

EVERY = Epilogue(True, True, True, "leaky_relu", True)
VALUES = {"alpha": -0.75, "beta": 0.5, "z_scale": 1.5, "activation": ("leaky_relu", 0.2)}
#: (problem, the candidates find must rank for it with EVERY).  A 1-D NWC and a 2-D NHWC
#: problem run gemm.Im2ColGemm through its composite (unfused: the pass after the transpose
#: out), a 3-D NCDHW one fused and unfused; the naive solver fuses in every layout.
NAIVE = {"direct.NaiveFwd", "direct.NaiveFwd" + UNFUSED}
CASES = {
    "1d-NWC": (Problem.conv1d((2, 4, 9), (6, 2, 3), stride=2, padding=((1, 0),), groups=2,
                              layout="NWC"), {"gemm.Im2ColGemm" + NCHW} | NAIVE),
    "3d-NCDHW": (Problem.conv3d((1, 3, 3, 4, 5), (4, 3, 2, 1, 3), padding=(0, 0, 1)),
                 {"gemm.Im2ColGemm", "gemm.Im2ColGemm" + UNFUSED} | NAIVE),
    "2d-NHWC": (Problem.conv2d((2, 4, 5, 4), (6, 4, 3, 3), padding=1, layout="NHWC"),
                {"gemm.Im2ColGemm" + NCHW} | NAIVE),
}


@pytest.fixture
def with_gemm(monkeypatch):
    """The naive solvers (every layout, fused) and the GEMM family."""
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,gemm")


def test_every_rank_and_layout_takes_an_epilogue():
    """A problem of any rank and layout carries an epilogue at the end of its key (2-D NCHW's
    keys unchanged), and its key parses back."""
    nchw = Problem.conv2d((1, 2, 5, 5), (3, 2, 3, 3)).with_epilogue(Epilogue(bias=True))
    assert nchw.key() == ("fwd-n1-c2-h5-w5-k3-y3-x3-p0.0-q0.0-u1-v1-l1-j1-g1-float32-NCHW"
                          "-epi.bias")
    for problem, _ in CASES.values():
        with_epilogue = problem.with_epilogue(EVERY)
        assert with_epilogue.key() == problem.key() + "-" + EVERY.key()
        assert Problem.from_key(with_epilogue.key()) == with_epilogue
    with pytest.raises(ValidationError, match="epilogue"):   # backward: alpha and blend only
        CASES["2d-NHWC"][0].with_direction("bwd").with_epilogue(Epilogue(bias=True))


@pytest.mark.parametrize("name", list(CASES))
def test_reference_and_every_candidate_agree(handle, with_gemm, name):
    """The float64 reference takes the bias per output channel in the output's layout (a
    channels-last result is the channels-first one transposed), and find ranks the expected
    candidates, each of which (run by name) computes it."""
    bare, expected_names = CASES[name]
    problem = bare.with_epilogue(EVERY)
    host, operands = random_tensors(problem), epilogue_operands(problem, 3)
    expected = reference.compute(problem, *(host[n] for n in "xwy"), **operands, **VALUES)
    first = Problem.convolution(bare.x.shape, bare.w.shape, bare.conv.strides, bare.conv.pads,
                                groups=bare.groups, epilogue=EVERY)   # channels-first
    axes = (0, bare.spatial_dims + 1, *range(1, bare.spatial_dims + 1))   # memory -> logical
    logical = {n: np.ascontiguousarray(host[n].transpose(axes)) if getattr(
        bare, n).channels_last else host[n] for n in "xwy"}
    z = operands["z"].transpose(axes) if bare.y.channels_last else operands["z"]
    expected_first = reference.compute(first, *logical.values(), **{**operands, "z": z},
                                       **VALUES)
    assert np.allclose(expected.transpose(axes) if bare.y.channels_last else expected,
                       expected_first)
    flags = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
    device = {n: cl.Buffer(handle.context, flags, hostbuf=a) for n, a in operands.items()}
    buffers = device_buffers(handle, host)
    ranked = convsolve.find(handle, problem, **buffers, **device, **VALUES, mode="NORMAL",
                            request_count=20)
    assert expected_names <= {s.solver for s in ranked}
    assert {c.name for c in candidates(problem)[0]} >= expected_names
    for solution in ranked:
        buffers = device_buffers(handle, host)   # y's prior contents again (beta != 0)
        convsolve.run(handle, problem, solution.solver, **buffers, **device, **VALUES)
        error = reference.relative_error(read_output(handle, problem, buffers), expected)
        assert error < 1e-5, solution.solver


@pytest.mark.parametrize("name", list(CASES))
def test_numpy_api_of_every_rank(handle, with_gemm, name):
    """conv1d / conv2d / conv3d take bias, scale, z, y and the activation in any layout (arrays
    in memory order), through find and through a named solver."""
    bare, _ = CASES[name]
    host, operands = random_tensors(bare), epilogue_operands(bare, 3)
    layout, rank = bare.y.layout, bare.spatial_dims
    convolve = {1: convsolve.conv1d, 2: convsolve.conv2d, 3: convsolve.conv3d}[rank]
    problem = bare.with_epilogue(EVERY)
    expected = reference.compute(problem, *(host[n] for n in "xwy"), **operands, **VALUES)
    for solver in (None, "direct.NaiveFwd", "direct.NaiveFwd" + UNFUSED):
        got = convolve(host["x"], host["w"], bare.conv.strides, bare.conv.pads,
                       groups=bare.groups, layout=layout, y=host["y"], **operands, **VALUES,
                       solver=solver, handle=handle)
        assert got.shape == bare.y.memory_shape
        assert reference.relative_error(got, expected) < 1e-5, solver


def test_channels_last_gradients_blend(handle):
    """Backward-data of an NHWC problem: dx = alpha * conv_bwd + beta * dx_prior."""
    problem = CASES["2d-NHWC"][0].with_direction("bwd")
    host = random_tensors(problem)
    dx = convsolve.conv2d_backward_data(host["y"], host["w"], host["x"].shape, padding=1,
                                        layout="NHWC", alpha=2.0, beta=-1.0, dx=host["x"],
                                        handle=handle)
    expected = 2 * reference.backward_data(problem, host["y"], host["w"]) - host["x"]
    assert reference.relative_error(dx, expected) < 1e-5


@pytest.mark.parametrize("convolve, layout, x, w", [
    (convsolve.conv2d, None, (1, 4, 5, 5), (6, 4, 3, 3)),
    (convsolve.conv2d, "NHWC", (1, 5, 5, 4), (6, 3, 3, 4)),
    (convsolve.conv1d, "NWC", (1, 5, 4), (6, 3, 4)),
])
def test_bias_of_the_wrong_length_names_the_field(convolve, layout, x, w):
    """A bias of K + 1 values is the same ValidationError in a channels-last problem as in
    NCHW, naming bias.shape, before anything reaches OpenCL (no handle is made)."""
    zeros = np.zeros
    with pytest.raises(ValidationError, match=r"invalid bias.shape=\(7,\).*needs \(6,\)"):
        convolve(zeros(x, np.float32), zeros(w, np.float32), layout=layout,
                 bias=zeros(7, np.float32), handle="not a handle")


def test_explain_names_the_composite_of_an_epilogue_problem(handle, with_gemm):
    """explain lists a composite's unfused epilogue candidate with what it runs."""
    from convsolve.cli.explain import explain
    problem = CASES["2d-NHWC"][0].with_epilogue(EVERY)
    rows = {row["solver"]: row for row in explain(handle, problem)}
    assert "composite: gemm.Im2ColGemm on channels-first copies of x, w, y" in rows[
        "gemm.Im2ColGemm" + NCHW]["status"]
