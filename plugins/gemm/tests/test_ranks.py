"""convsolve-gemm in spatial rank 1 and 3: Im2ColGemm and GemmWrwSplitK on NCW and NCDHW
tensors through unfold_nd.cl, Gemm1x1 on channels-first and channels-last ones, every
direction, against the float64 reference with exact workspaces (check_solver); 2-D keeps its
kernels, launches and workspace; the epilogue stages each solver fuses in ranks 1 and 3."""
import math

import convsolve
import numpy as np
import pyopencl as cl
import pytest
from convsolve import Buffers, Direction, Epilogue, Problem
from convsolve.testing import (
    check_solver,
    device_buffers,
    fake_handle,
    random_tensors,
    relative_error,
)
from convsolve_gemm import channels_last, configs, conv_layout, plan

#: (x_shape, w_shape, stride, padding, dilation, groups) per rank: odd and non-cubic sizes,
#: batch 1 and more, strides, dilations, groups, depthwise, asymmetric padding, windows wholly
#: in the padding, and a strided pointwise filter through columns.
SHAPES = {
    1: [((1, 5, 13), (4, 5, 3), 1, 1, 1, 1),
        ((3, 6, 17), (4, 3, 4), 2, ((2, 1),), 3, 2),
        ((2, 4, 9), (4, 1, 5), 3, ((0, 4),), 1, 4),                       # depthwise
        ((1, 2, 3), (3, 2, 2), 1, ((3, 2),), 1, 1)],                      # windows in the padding
    3: [((1, 3, 4, 5, 6), (4, 3, 2, 3, 1), 1, ((1, 0), (0, 1), (0, 0)), 1, 1),
        ((2, 4, 5, 7, 6), (6, 2, 3, 2, 3), (2, 1, 3), ((1, 1), (2, 0), (0, 2)), (2, 1, 2), 2),
        ((2, 3, 3, 4, 5), (3, 1, 3, 3, 3), (1, 2, 1), 1, 1, 3),           # depthwise
        ((2, 4, 5, 6, 7), (6, 4, 1, 1, 1), (2, 1, 2), 0, 1, 1)],          # strided pointwise
}
#: 1x1 problems for Gemm1x1: (x_shape, w_shape, stride, groups, layout) in each rank, stride 1
#: (x is the column matrix, or the pixel matrix) and strided (gathered), channels-first,
#: channels-last, and weights in the other order (one memory order for 1x1).
POINTWISE = [
    ((2, 6, 11), (4, 3, 1), 1, 2, "NCW"),
    ((3, 5, 10), (7, 5, 1), 3, 1, "NCW"),
    ((1, 6, 9), (6, 1, 1), 2, 6, {"x": "NCW", "w": "NWC", "y": "NCW"}),     # depthwise
    ((2, 6, 11), (4, 3, 1), 1, 2, "NWC"),
    ((3, 6, 10), (9, 2, 1), 3, 3, {"x": "NWC", "w": "NCW", "y": "NWC"}),
    ((2, 4, 3, 5, 7), (6, 2, 1, 1, 1), 1, 2, "NCDHW"),
    ((1, 3, 5, 4, 7), (4, 3, 1, 1, 1), (2, 1, 3), 1, "NCDHW"),
    ((2, 4, 3, 5, 7), (6, 2, 1, 1, 1), 1, 2, "NDHWC"),
    ((2, 6, 3, 5, 7), (4, 3, 1, 1, 1), (1, 2, 3), 2, {"x": "NDHWC", "w": "NCDHW", "y": "NDHWC"}),
]


def _solver(name):
    return convsolve.registry().get(name)


def _problems(rank, direction):
    return [Problem.convolution(*shape, direction=direction) for shape in SHAPES[rank]]


@pytest.mark.parametrize("direction", list(Direction), ids=lambda d: d.value)
@pytest.mark.parametrize("rank", [1, 3])
def test_im2col_gemm_against_the_reference(handle, rank, direction):
    """Im2ColGemm passes check_solver (reference, output written whole, exact workspace,
    deterministic, non-finite inputs) on every shape of the rank, in every direction."""
    problems = _problems(rank, direction)
    assert check_solver(_solver("gemm.Im2ColGemm"), handle, problems, configs=0) == len(problems)


@pytest.mark.parametrize("rank", [1, 3])
def test_split_k_against_the_reference(handle, monkeypatch, rank):
    """GemmWrwSplitK (dy gathered through unfold_nd.cl) passes check_solver on every shape of
    the rank, its reductions split into uneven slices."""
    monkeypatch.setattr(plan, "MIN_SLICE_DEPTH", 4)
    problems = _problems(rank, Direction.BACKWARD_WEIGHTS)
    assert any(plan.layout(p, side_by_side=True).slices > 1 for p in problems)
    assert check_solver(_solver("gemm.GemmWrwSplitK"), handle, problems, configs=0) == len(
        problems)


@pytest.mark.parametrize("direction", list(Direction), ids=lambda d: d.value)
def test_gemm_1x1_against_the_reference(handle, direction):
    """Gemm1x1 passes check_solver on 1x1 problems of rank 1 and 3, channels-first and
    channels-last, at stride 1 and strided, with groups and depthwise."""
    problems = [Problem.convolution(x, w, stride, groups=g, direction=direction, layout=layout)
                for x, w, stride, g, layout in POINTWISE]
    assert check_solver(_solver("gemm.Gemm1x1"), handle, problems, configs=0) == len(problems)


@pytest.mark.parametrize("direction", list(Direction), ids=lambda d: d.value)
def test_chunks_of_images(handle, monkeypatch, direction):
    """With a workspace budget of two images, 5 images run in chunks of 2, 2 and 1 (dW summed
    over them) in rank 1 and 3, and an NDHWC problem's 10 depth slices (its planar images) in
    chunks of 4, correctly and within the workspace."""
    cases = [("gemm.Im2ColGemm", Problem.conv1d((5, 4, 11), (6, 2, 3), 2, ((1, 2),), 2, 2,
                                                 direction), False),
             ("gemm.Im2ColGemm", Problem.conv3d((5, 2, 3, 4, 5), (3, 2, 2, 3, 2), (1, 2, 1), 1,
                                                 direction=direction), False)]
    if direction is Direction.BACKWARD_WEIGHTS:
        cases.append(("gemm.GemmWrwSplitK", cases[1][1], True))
    for name, problem, side_by_side in cases:
        budget = 2 * plan.bytes_per_image(problem, side_by_side) + 1
        monkeypatch.setattr(conv_layout, "COLUMN_BUDGET_BYTES", budget)
        assert plan.layout(problem, side_by_side).chunk == 2
        assert check_solver(_solver(name), handle, [problem], configs=0) == 1
    last = Problem.conv3d((2, 6, 5, 5, 7), (4, 3, 1, 1, 1), (1, 2, 3), groups=2,
                          direction=direction, layout="NDHWC")
    planar = channels_last.planar(last)
    per_image = planar.out_h * planar.out_w * conv_layout.padded_pitch(6) * 4
    monkeypatch.setattr(conv_layout, "COLUMN_BUDGET_BYTES", 4 * per_image)
    assert (planar.n, channels_last.layout(planar).chunk) == (10, 4)
    assert check_solver(_solver("gemm.Gemm1x1"), handle, [last], configs=0) == 1


def test_workspace_figures_of_ranks_1_and_3():
    """The workspace is one chunk's matrices laid out as in 2-D, rows Cg * prod(filter) and
    columns prod(output), exactly; strided channels-last 1x1, one chunk's gathered pixels."""
    im2col, split_k, gemm_1x1 = (_solver(n) for n in (
        "gemm.Im2ColGemm", "gemm.GemmWrwSplitK", "gemm.Gemm1x1"))
    wide = Problem.conv1d((4, 6, 1024), (6, 6, 3), padding=1)     # 1024 columns: pitch 1040
    assert im2col.workspace(wide) == (4 * 18 * 1040 - 1040 + 1024) * 4
    cube = Problem.conv3d((2, 4, 6, 7, 8), (8, 2, 3, 3, 3), padding=1, groups=2)
    pixels, rows = 6 * 7 * 8, 2 * 27                               # per matrix: 54 x 336
    assert im2col.workspace(cube) == 2 * 2 * rows * pixels * 4
    wrw = cube.with_direction("wrw")                               # and a partial dW per image
    assert im2col.workspace(wrw) == (2 * 2 * rows * pixels + 2 * 8 * rows) * 4
    # side by side: the columns and dy of 2 images (672 columns), then 2 slices of partial dW
    assert plan.reduction_slices(wrw, 2 * pixels) == (pixels, 2)
    assert split_k.workspace(wrw) == ((2 * rows + 8) * 2 * pixels + 2 * 8 * rows) * 4
    pointwise = Problem.conv3d((2, 6, 3, 5, 7), (4, 6, 1, 1, 1), (1, 2, 2), layout="NDHWC")
    cpu = fake_handle("avx2")
    assert gemm_1x1.workspace(pointwise, cpu) == (2 * 3 * 3 * 4 - 1) * 6 * 4 + 6 * 4
    assert gemm_1x1.workspace(Problem.conv1d((2, 6, 9), (4, 6, 1), layout="NWC"), cpu) == 0
    assert gemm_1x1.workspace(Problem.conv3d((2, 6, 3, 5, 7), (4, 6, 1, 1, 1)), cpu) == 0


def _unfold_builds_and_launches(handle, monkeypatch, problem):
    """(the builds other than gemm.cl as (file, kernel, defines), the launches as (kernel,
    global size)) of building Im2ColGemm's invoker for ``problem`` and running it once."""
    builds, launches = [], []
    real_build, real_enqueue = handle.build, cl.enqueue_nd_range_kernel

    def build(file, kernel, defines=None):
        if file.name != "gemm.cl":
            builds.append((file.name, kernel, dict(defines or {})))
        return real_build(file, kernel, defines)

    def enqueue(queue, kernel, size, local=None):
        launches.append((kernel.function_name, tuple(size)))
        return real_enqueue(queue, kernel, size, local)
    monkeypatch.setattr(handle, "build", build)
    monkeypatch.setattr(cl, "enqueue_nd_range_kernel", enqueue)
    solver = _solver("gemm.Im2ColGemm")
    invoker = solver.build_invoker(problem, handle, solver.default_config(problem, handle))
    buffers = Buffers(**device_buffers(handle, random_tensors(problem)))
    scratch = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, solver.workspace(problem))
    cl.wait_for_events(invoker(buffers, scratch))
    monkeypatch.undo()
    return builds, launches


@pytest.mark.parametrize("direction", [Direction.FORWARD, Direction.BACKWARD_DATA],
                         ids=lambda d: d.value)
def test_two_d_keeps_its_kernels_launches_and_workspace(handle, monkeypatch, direction):
    """2-D builds im2col.cl, and for backward-data col2im.cl, with one define each (forward
    builds no col2im: a program load less) and launches the unfold over the sizes it always
    had on rows as wide as this problem's (OH * ceil(OW / TW), Cg*R*S, images * G; H * ceil(W
    / TW), Cg, images * G; im2col takes TW / OW rows a work-item only where OW < TW), beside
    one GEMM; 3-D builds unfold_nd.cl, one program for both kernels, and launches as many kernels;
    the 2-D workspace is the formula's figure."""
    square = Problem.conv2d((2, 4, 9, 70), (4, 4, 3, 3), padding=1, direction=direction)
    cube = Problem.conv3d((2, 4, 3, 9, 70), (4, 4, 3, 3, 3), padding=1, direction=direction)
    kind = configs.device_kind(handle)
    tw = conv_layout.IM2COL_TW[kind], conv_layout.COL2IM_TW[kind]
    local = conv_layout.LOCAL_SIZE[kind]
    builds, launches = _unfold_builds_and_launches(handle, monkeypatch, square)
    folds = [("col2im.cl", "col2im", {"COL2IM_TW": tw[1]})]
    assert builds == [("im2col.cl", "im2col", {"IM2COL_TW": tw[0]}),
                      *(folds if direction is Direction.BACKWARD_DATA else [])]
    if direction is Direction.FORWARD:
        name, size = "im2col", (9 * math.ceil(70 / tw[0]), 36, 2)
        assert [k for k, _ in launches] == ["im2col", "gemm"]
    else:
        name, size = "col2im", (9 * math.ceil(70 / tw[1]), 4, 2)
        assert [k for k, _ in launches] == ["gemm", "col2im"]
    if name in local:
        size = tuple(-(-extent // step) * step for extent, step in zip(size, local[name]))
    assert dict(launches)[name] == size
    assert _solver("gemm.Im2ColGemm").workspace(square) == 2 * 36 * 630 * 4
    builds, nd_launches = _unfold_builds_and_launches(handle, monkeypatch, cube)
    both = {"IM2COL_TW": tw[0], "COL2IM_TW": tw[1]}
    assert builds == [("unfold_nd.cl", "im2col_nd", both),
                      *([("unfold_nd.cl", "col2im_nd", both)]
                        if direction is Direction.BACKWARD_DATA else [])]
    assert [k.replace("_nd", "") for k, _ in nd_launches] == [k for k, _ in launches]


def test_fused_stages_in_other_ranks(handle):
    """1-D and 3-D channels-first problems fuse their whole epilogue in the GEMM (rows are
    channels) or the split sum, but backward-data through columns none: unfold_nd.cl's col2im
    stores no epilogue, and Columns refuses one; channels-last Gemm1x1 fuses none."""
    blend = Epilogue(blend=True)
    for make, x, w in ((Problem.conv1d, (1, 2, 5), (2, 2, 3)),
                       (Problem.conv3d, (1, 2, 3, 4, 5), (2, 2, 1, 2, 1))):
        forward = make(x, w, epilogue=Epilogue(True, True, True, "relu", True))
        assert _solver("gemm.Im2ColGemm").fused_stages(forward) == 6
        assert _solver("gemm.Im2ColGemm").fused_stages(
            make(x, w, direction="bwd", epilogue=blend)) == 0
        assert _solver("gemm.GemmWrwSplitK").fused_stages(
            make(x, w, direction="wrw", epilogue=blend)) == 2
    with pytest.raises(ValueError, match="col2im stores no epilogue"):
        conv_layout.Columns(handle, Problem.conv1d((1, 2, 5), (2, 2, 3), direction="bwd"),
                            blend)
    assert _solver("gemm.Gemm1x1").fused_stages(Problem.conv1d(
        (1, 2, 5), (2, 2, 1), layout="NWC", epilogue=Epilogue(bias=True))) == 0
    assert _solver("gemm.Gemm1x1").fused_stages(Problem.conv1d(
        (1, 2, 5), (2, 2, 1), direction="bwd", epilogue=blend)) == 2   # no columns: the GEMM


def test_refusals():
    """Gemm1x1 declines filters past 1 and padding in any dim, and channels-last 3-D with a
    depth stride (its depth slices are no planar images); Im2ColGemm serves channels-first
    only (find runs NWC on it through its composite /nchw candidate)."""
    gemm_1x1 = _solver("gemm.Gemm1x1")
    for problem in (Problem.conv1d((1, 4, 5), (4, 4, 1), padding=((0, 1),)),
                    Problem.conv3d((1, 4, 5, 5, 5), (4, 4, 1, 1, 2)),
                    Problem.conv3d((1, 4, 5, 5, 5), (4, 4, 1, 1, 1), (2, 1, 1), layout="NDHWC"),
                    Problem.conv1d((1, 4, 5), (4, 4, 1), layout={"x": "NWC", "y": "NCW"})):
        assert not gemm_1x1.is_applicable(problem), problem.key()
    assert gemm_1x1.is_applicable(Problem.conv3d((1, 4, 5, 5, 5), (4, 4, 1, 1, 1), (2, 1, 1)))
    ncw = Problem.conv1d((1, 4, 5), (4, 4, 3))
    assert "gemm.Im2ColGemm" in convsolve.applicable_solvers(ncw)
    nwc = Problem.conv1d((1, 4, 5), (4, 4, 3), layout="NWC")
    assert "gemm.Im2ColGemm" not in convsolve.applicable_solvers(nwc)


def test_numpy_api_in_rank_1_and_3(handle):
    """convsolve.conv1d / conv3d and their gradients on the GEMM solvers match the reference:
    Im2ColGemm on NCW, Gemm1x1 on strided NDHWC (arrays in memory order)."""
    rng = np.random.default_rng(0)
    cases = [("gemm.Im2ColGemm", "conv1d", (2, 4, 11), (6, 2, 3),
              {"stride": 2, "padding": ((1, 2),), "dilation": 2, "groups": 2}),
             ("gemm.Gemm1x1", "conv3d", (2, 6, 3, 5, 7), (4, 3, 1, 1, 1),
              {"stride": (1, 2, 3), "groups": 2, "layout": "NDHWC"})]
    for solver, name, x_shape, w_shape, kw in cases:
        problem = Problem.convolution(x_shape, w_shape, **kw)
        x, w, dy = (rng.standard_normal(getattr(problem, t).memory_shape, dtype=np.float32)
                    for t in "xwy")
        call = {**kw, "solver": solver, "handle": handle}
        api = {suffix: getattr(convsolve, name + suffix)
               for suffix in ("", "_backward_data", "_backward_weights")}
        for result, expected in (
                (api[""](x, w, **call), convsolve.reference.forward(problem, x, w)),
                (api["_backward_data"](dy, w, x.shape, **call),
                 convsolve.reference.backward_data(problem, dy, w)),
                (api["_backward_weights"](dy, x, w.shape, **call),
                 convsolve.reference.backward_weights(problem, x, dy))):
            assert result.shape == expected.shape and relative_error(result, expected) < 1e-5
