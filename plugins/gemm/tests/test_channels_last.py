"""convsolve-gemm on channels-last tensors: gemm.Gemm1x1 computes NHWC 1x1 problems as plain
GEMMs in every direction (groups, strides through a gathered pixel matrix, chunks of images),
with an exact workspace, and declines what it does not compute."""
import convsolve
import numpy as np
import pytest
from convsolve import Direction, Problem
from convsolve.testing import check_solver, fake_handle, relative_error
from convsolve_gemm import channels_last, conv_layout, plan

NHWC = "NHWC"
W_NCHW = {"x": "NHWC", "w": "NCHW", "y": "NHWC"}   # 1x1 weights: the same memory either way
W_NHWC = {"x": "NCHW", "w": "NHWC", "y": "NCHW"}   # so the NCHW plan serves these too
#: (x_shape, w_shape, stride, groups, layout), logical shapes: odd and non-square sizes,
#: batch 1 and 3, groups, unequal strides.
SHAPES = [
    ((1, 5, 7, 3), (6, 5, 1, 1), 1, 1, NHWC),
    ((3, 6, 9, 7), (4, 3, 1, 1), (2, 3), 2, W_NCHW),
    ((2, 9, 5, 6), (6, 3, 1, 1), 2, 3, NHWC),
    ((2, 6, 5, 7), (6, 2, 1, 1), 2, 3, W_NHWC),
]
#: Run on Oclgrind (memory and race checks): the plain GEMM and the gather / scatter, grouped.
SANITIZED = [((2, 6, 5, 4), (4, 3, 1, 1), 1, 2, NHWC), ((2, 6, 5, 4), (4, 3, 1, 1), (2, 3), 2, NHWC)]


def _gemm_1x1():
    return convsolve.registry().get("gemm.Gemm1x1")


@pytest.mark.parametrize("direction", list(Direction), ids=lambda d: d.value)
def test_check_solver_on_nhwc(handle, direction):
    """check_solver passes on NHWC problems (w NHWC or NCHW; and NCHW x, y with NHWC w) of
    every kind above: correct, all of the output written, the workspace exact, deterministic."""
    problems = [Problem.conv2d(x, w, stride, groups=g, direction=direction, layout=layout)
                for x, w, stride, g, layout in SHAPES]
    assert check_solver(_gemm_1x1(), handle, problems, configs=1) == len(problems)


@pytest.mark.parametrize("direction", list(Direction), ids=lambda d: d.value)
def test_nhwc_in_chunks_of_images(handle, monkeypatch, direction):
    """With a workspace budget of two images a strided NHWC batch of 5 runs in chunks of 2, 2
    and 1 (dW summed over them), correctly and within its workspace."""
    problem = Problem.conv2d((5, 6, 9, 7), (4, 3, 1, 1), stride=2, groups=2,
                             direction=direction, layout=NHWC)
    per_image = problem.out_h * problem.out_w * conv_layout.padded_pitch(6) * 4
    monkeypatch.setattr(conv_layout, "COLUMN_BUDGET_BYTES", 2 * per_image + 1)
    assert channels_last.layout(problem).chunk == 2
    assert check_solver(_gemm_1x1(), handle, [problem], configs=0) == 1


@pytest.mark.parametrize("stride", [1, 2])
def test_nhwc_backward_weights_in_slices(handle, monkeypatch, stride):
    """Backward-weights split as on GPUs (forced here) sums each chunk's slices in order: with
    MIN_SLICE_DEPTH 16, 175 pixels (stride 1) give 10 slices, the last one shorter; strided,
    chunks of 2 images (84 pixels) give 5 and the last image alone 2, summed into dW after the
    first chunk's; correct, the workspace exact."""
    monkeypatch.setattr(plan, "MIN_SLICE_DEPTH", 16)
    monkeypatch.setattr(channels_last, "splits", lambda handle: True)
    x = (5, 6, 5, 7) if stride == 1 else (5, 6, 11, 13)
    problem = Problem.conv2d(x, (4, 3, 1, 1), stride, groups=2, direction="wrw", layout=NHWC)
    if stride == 2:
        per_image = problem.out_h * problem.out_w * conv_layout.padded_pitch(6) * 4
        monkeypatch.setattr(conv_layout, "COLUMN_BUDGET_BYTES", 2 * per_image + 1)
    assert channels_last.layout(problem, True).slices == (10 if stride == 1 else 5)
    assert check_solver(_gemm_1x1(), handle, [problem], configs=1) == 1


@pytest.mark.sanitized
def test_nhwc_kernels_are_clean_under_oclgrind():
    """The NHWC plan's launches (column-sliced groups, the gather and the scatter) run clean
    under Oclgrind's memory and race checks, as a CPU and as a GPU, in every direction (the
    core's sanitized suite only reaches the NHWC problems convsolve.testing generates)."""
    problems = [Problem.conv2d(x, w, stride, groups=g, direction=d, layout=layout)
                for x, w, stride, g, layout in SANITIZED for d in Direction]
    assert check_solver(_gemm_1x1(), None, problems, configs=1, sanitize=True) == len(problems)


def test_numpy_api_with_layout_nhwc(handle):
    """convsolve.conv2d and its gradients with layout="NHWC" on gemm.Gemm1x1 match the numpy
    reference computed on the NCHW transposes: groups, stride 2, batch 2."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 7, 9, 6), dtype=np.float32)      # N H W C
    w = rng.standard_normal((4, 1, 1, 3), dtype=np.float32)      # K R S C/G
    dy = rng.standard_normal((2, 4, 5, 4), dtype=np.float32)     # N OH OW K
    nchw = Problem.conv2d((2, 6, 7, 9), (4, 3, 1, 1), stride=2, groups=2)
    x_, w_, dy_ = (a.transpose(0, 3, 1, 2) for a in (x, w, dy))
    kw = {"stride": 2, "groups": 2, "layout": NHWC, "solver": "gemm.Gemm1x1", "handle": handle}
    results = [
        (convsolve.conv2d(x, w, **kw).transpose(0, 3, 1, 2),
         convsolve.reference.forward(nchw, x_, w_)),
        (convsolve.conv2d_backward_data(dy, w, x.shape, **kw).transpose(0, 3, 1, 2),
         convsolve.reference.backward_data(nchw, dy_, w_)),
        (convsolve.conv2d_backward_weights(dy, x, w.shape, **kw).transpose(0, 3, 1, 2),
         convsolve.reference.backward_weights(nchw, x_, dy_)),
    ]
    for result, expected in results:
        assert result.shape == expected.shape and relative_error(result, expected) < 1e-5


def test_nhwc_workspace_and_refusals():
    """Stride 1 needs no workspace; strided, the gathered pixels of one chunk, the last row
    unpadded; padding, larger filters and x, y in different layouts are declined, and NHWC
    problems fuse no epilogue stage (their GEMM rows are pixels: the core's pass applies it)."""
    solver, cpu, gpu = _gemm_1x1(), fake_handle("avx2"), fake_handle("gpu")
    pointwise = Problem.conv2d((8, 256, 56, 56), (64, 256, 1, 1), layout=NHWC)
    assert solver.is_applicable(pointwise) and solver.workspace(pointwise, cpu) == 0
    assert solver.workspace(pointwise.with_direction("wrw"), cpu) == 0
    # on GPUs backward-weights' partial dW of reduction_slices' 98 slices (4 tiles of dW, 25,088
    # pixels: min(512 / 4, 25,088 // 256, 128))
    assert solver.workspace(pointwise.with_direction("wrw"), gpu) == 98 * 64 * 256 * 4
    strided = Problem.conv2d((8, 1024, 14, 14), (2048, 1024, 1, 1), stride=2, layout=NHWC)
    rows = ((8 * 49 - 1) * 1040 + 1024) * 4   # 4 KiB rows padded
    assert solver.workspace(strided, cpu) == solver.workspace(strided, gpu) == rows
    for problem in (
            Problem.conv2d((1, 4, 5, 5), (4, 4, 1, 1), padding=1, layout=NHWC),
            Problem.conv2d((1, 4, 5, 5), (4, 4, 3, 3), padding=1, layout=NHWC),
            Problem.conv2d((1, 4, 5, 5), (4, 4, 3, 3), layout=NHWC),
            Problem.conv2d((1, 4, 5, 5), (4, 4, 1, 1), layout={"x": "NHWC", "y": "NCHW"}),
            Problem.conv2d((1, 4, 5, 5), (4, 4, 1, 1), layout={"x": "NCHW", "y": "NHWC"})):
        for direction in Direction:
            assert not solver.is_applicable(problem.with_direction(direction)), problem.key()
    assert solver.fused_stages(pointwise) == 0
    assert "gemm.Gemm1x1" in convsolve.applicable_solvers(pointwise)
    assert "gemm.Im2ColGemm" not in convsolve.applicable_solvers(pointwise)   # NCHW only
