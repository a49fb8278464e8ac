"""convsolve-direct's fused epilogue: each solver stores all of it in every direction it serves
(backward-weights' reduction over several chunks alpha only, the core's pass blending), with
the bare workspace; check_solver's epilogue cases on outputs wide enough for whole-vector
stores, on strided stores and on a reduction in chunks; the solver API declared is the epilogue
hook's."""
import pytest
from convsolve import Direction, Epilogue, Problem, registry
from convsolve.testing import check_solver
from convsolve_direct import plan

ALL = Epilogue(True, True, True, "leaky_relu", True)
#: Rows of 37 outputs: two whole 16-lane vectors and a part (the whole-vector store reads z and
#: the prior output as vectors); backward-data also with stride 2 (its stores are strided).
#: Depthwise forward also on rows of 13, which its unstaged CPU kernel takes a column of vectors
#: at a time, its vectors past a row's end stored whole over the next row's first elements (its
#: stride-2 backward-data, unstaged on CPUs, stores the two column phases alternated).
WIDE = {
    "direct.Tiled": [
        Problem.conv2d((1, 6, 5, 37), (8, 3, 3, 3), padding=((1, 0), (1, 1)), groups=2),
        Problem.conv2d((1, 6, 5, 37), (8, 3, 3, 3), padding=1, groups=2, direction="bwd"),
        Problem.conv2d((1, 4, 5, 74), (6, 4, 3, 3), stride=2, padding=1, direction="bwd")],
    "direct.Depthwise": [
        Problem.conv2d((1, 4, 5, 37), (8, 1, 3, 3), padding=((0, 1), (1, 1)), groups=4),
        Problem.conv2d((2, 3, 6, 13), (3, 1, 3, 3), padding=1, groups=3),
        Problem.conv2d((1, 4, 5, 37), (8, 1, 3, 3), padding=1, groups=4, direction="bwd"),
        Problem.conv2d((1, 4, 5, 74), (4, 1, 3, 3), stride=2, padding=1, groups=4,
                       direction="bwd")],
}


@pytest.mark.parametrize("name", ["direct.NaiveFwd", "direct.NaiveBwdData", "direct.NaiveBwdWeights",
                                  "direct.Tiled", "direct.Depthwise", "direct.Wrw"])
def test_fuses_every_stage_with_the_bare_workspace(name):
    """Every direction fuses all of its epilogue (one chunk of images backward-weights), and the
    workspace does not change with it."""
    solver = registry().get(name)
    for shape in [((2, 4, 6, 5), (8, 1, 3, 3), 4), ((2, 4, 6, 5), (6, 4, 3, 3), 1)]:
        for direction in solver.directions:
            problem = Problem.conv2d(shape[0], shape[1], padding=1, groups=shape[2],
                                     direction=direction)
            epilogue = ALL if direction is Direction.FORWARD else Epilogue(blend=True)
            assert solver.fused_stages(problem.with_epilogue(epilogue)) == len(epilogue.stages)
            if solver.is_applicable(problem):
                assert solver.workspace(problem.with_epilogue(epilogue)) == \
                    solver.workspace(problem)


@pytest.mark.parametrize("name", WIDE)
def test_whole_vector_and_strided_stores(handle, name):
    """check_solver's epilogue cases on rows of whole vectors and a part, and on strided
    backward-data stores."""
    assert check_solver(registry().get(name), handle, WIDE[name], configs=0) == len(WIDE[name])


@pytest.mark.parametrize("name", ["direct.Wrw", "direct.Depthwise"])
def test_reduction_in_chunks_fuses_alpha_only(handle, monkeypatch, name):
    """With a workspace of one image's partial sums, a 3-image reduction runs in 3 chunks: the
    last fold stores alpha, the core's pass the blend (check_solver's epilogue cases)."""
    problem = Problem.conv2d((3, 4, 6, 5), (8, 1, 3, 3), padding=1, groups=4, direction="wrw")
    solver = registry().get(name)
    one_image = solver.workspace(problem) // 3
    monkeypatch.setattr(plan, "BUDGET_BYTES", one_image)
    assert solver.workspace(problem) == one_image
    assert solver.fused_stages(problem.with_epilogue(Epilogue(blend=True))) == 1
    assert check_solver(solver, handle, [problem], configs=0) == 1
