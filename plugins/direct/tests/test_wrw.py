"""direct.Wrw: the contract, a sweep of awkward shapes, bitwise determinism over repeated runs
and across batch chunkings, and its exact workspace."""
import pytest
from convsolve import Problem, registry
from convsolve.testing import check_solver, random_tensors
from convsolve_direct import plan, wrw
from direct_helpers import assert_matches_reference, equal_bits, run_config

SHAPES = [
    ((1, 1, 5, 4), (1, 1, 2, 3), 1, 0, 1, 1),                     # C = K = 1
    ((2, 3, 19, 21), (6, 3, 7, 7), 2, 3, 1, 1),                   # the stem's shape, small
    ((3, 4, 13, 17), (9, 4, 3, 2), (3, 2), ((2, 0), (1, 3)), 1, 1),  # stride 3, asymmetric pads
    ((2, 6, 12, 15), (4, 3, 3, 3), 1, 3, (3, 2), 2),              # dilation, groups
    ((1, 5, 9, 40), (7, 5, 1, 1), (1, 2), 0, 1, 1),               # strided 1x1, wide rows
]
#: Besides the default: both stage-1 kernels (wrw_partial, and wrw_taps where S <= VW / 2), with
#: channel and column blocks that leave tails.
WISHES = [{"VW": 8, "KB": 1, "SB": 2, "WGX": 4, "TAPS": 0}, {"VW": 16, "KB": 4, "SB": 4, "TAPS": 0},
          {"VW": 16, "KB": 4, "SB": 1, "TAPS": 1}]


def test_check_solver(handle):
    """direct.Wrw honours the contract on the standard problem set (default configs)."""
    assert check_solver(registry().get("direct.Wrw"), handle, configs=0) > 0


@pytest.mark.parametrize("shape", SHAPES, ids=[str(i) for i in range(len(SHAPES))])
def test_sweep(handle, shape):
    """Backward-weights agrees with the reference with each config chosen."""
    assert_matches_reference(handle, "direct.Wrw", Problem.conv2d(*shape, direction="wrw"),
                             WISHES)


def test_bitwise_equal_over_runs_and_chunkings(handle, monkeypatch):
    """Repeated runs, and runs whose batch goes in chunks of 1, 2 or all 5 images (a smaller
    workspace), give bitwise-equal weight gradients."""
    solver = registry().get("direct.Wrw")
    problem = Problem.conv2d((5, 3, 14, 13), (4, 3, 3, 3), padding=1, direction="wrw")
    host = random_tensors(problem, 3)
    config = solver.default_config(problem, handle)
    whole = plan.Partials.plan(problem, wrw._units(problem))
    assert whole.chunk == 5
    first = run_config(handle, solver, problem, config, host)
    assert equal_bits(first, run_config(handle, solver, problem, config, host))
    per_image = 4 * whole.count * whole.tiles_per_image
    for images in (1, 2):
        monkeypatch.setattr(plan, "BUDGET_BYTES", images * per_image)
        assert plan.Partials.plan(problem, wrw._units(problem)).chunk == images
        assert solver.workspace(problem) == images * per_image
        assert equal_bits(first, run_config(handle, solver, problem, config, host))


def test_workspace_formula():
    """The workspace is one partial dW per tile of the chunk: the stem at batch 8 tiles each
    image into 4 tiles of 28 rows, all 8 images in one chunk."""
    problem = Problem.conv2d((8, 3, 224, 224), (64, 3, 7, 7), 2, 3, direction="wrw")
    partials = plan.Partials.plan(problem, wrw._units(problem))
    assert (partials.rows, partials.tiles_per_image, partials.chunk) == (28, 4, 8)
    assert registry().get("direct.Wrw").workspace(problem) == 4 * 64 * 3 * 49 * 4 * 8
    big = Problem.conv2d((64, 512, 7, 7), (512, 512, 3, 3), padding=1, direction="wrw")
    partials = plan.Partials.plan(big, wrw._units(big))
    assert partials.tiles_per_image == 1 and partials.workspace <= plan.BUDGET_BYTES
    assert partials.chunk == plan.BUDGET_BYTES // (4 * 512 * 512 * 9)
