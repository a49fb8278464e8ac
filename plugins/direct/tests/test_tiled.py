"""direct.Tiled: the contract, an awkward-shape sweep in both directions with several configs,
the phase decomposition of strided backward-data, its config space and workspace."""
import pytest
from convsolve import Direction, Problem, registry
from convsolve.testing import check_solver
from convsolve_direct.configs import TILED_DEFAULT_CONFIGS
from direct_helpers import assert_matches_reference, configs_to_check

# (x_shape, w_shape, stride, padding, dilation, groups)
SHAPES = [
    ((1, 1, 5, 4), (1, 1, 2, 3), 1, 0, 1, 1),                     # C = K = 1
    ((2, 3, 11, 23), (5, 3, 3, 3), 1, 1, 1, 1),                   # tiles not dividing the image
    ((1, 3, 19, 21), (6, 3, 7, 7), 2, 3, 1, 1),                   # the stem's shape, small
    ((1, 4, 13, 17), (19, 4, 3, 2), (3, 2), ((2, 0), (1, 3)), 1, 1),  # stride 3, asymmetric pads
    ((2, 6, 12, 15), (4, 3, 3, 3), 1, 3, (3, 2), 2),              # dilation, groups
    ((1, 5, 9, 40), (7, 5, 1, 1), (1, 2), 0, 1, 1),               # strided 1x1, wide rows
    ((3, 9, 6, 6), (18, 1, 3, 3), 2, 1, 1, 9),                    # depthwise with multiplier 2
]
#: Partial configs besides the default: other vector widths, vectors and rows per item,
#: channel blocks that leave a tail (KB = 4 over 5, 6, 7 or 19 channels), work-groups.
WISHES = [{"VW": 8, "VN": 2, "RB": 2, "KB": 1, "WGX": 2, "FIXED": 0},
          {"VW": 16, "VN": 1, "RB": 3, "KB": 4, "WGY": 4, "FIXED": 0}]


def test_check_solver(handle):
    """direct.Tiled honours the contract on the standard problem set (default configs)."""
    assert check_solver(registry().get("direct.Tiled"), handle, configs=0) > 0


@pytest.mark.parametrize("direction", ["fwd", "bwd"])
@pytest.mark.parametrize("shape", SHAPES, ids=[str(i) for i in range(len(SHAPES))])
def test_sweep(handle, shape, direction):
    """Forward and backward-data agree with the reference with each config chosen."""
    assert_matches_reference(handle, "direct.Tiled", Problem.conv2d(*shape, direction=direction),
                             WISHES)


def test_phase_decomposition_covers_every_phase(handle):
    """Strided backward-data where some phases are reached by no tap at all (stride 3 over a
    2-tap filter) still writes zeros there."""
    problem = Problem.conv2d((1, 2, 10, 11), (3, 2, 2, 2), stride=3, direction="bwd")
    assert_matches_reference(handle, "direct.Tiled", problem, [])


def test_config_space_and_defaults(handle):
    """KB never exceeds the channels per group, FIXED is offered for 3x3 and 7x7 only, and
    the default config is in the space and passes check_config."""
    tiled = registry().get("direct.Tiled")
    for shape, fixed in [(((1, 6, 8, 8), (3, 2, 3, 3), 1, 1, 1, 3), (0, 1)),
                         (((1, 3, 9, 9), (8, 3, 5, 5), 1, 2, 1, 1), (0,))]:
        problem = Problem.conv2d(*shape)
        space = tiled.config_space(problem, handle)
        assert max(space.params["KB"]) <= problem.k // problem.groups
        assert space.params["FIXED"] == fixed
        config = tiled.default_config(problem, handle)
        assert space.refusal(config) is None
        assert tiled.check_config(problem, handle, config) == []
    assert 2 <= len(configs_to_check(handle, tiled, Problem.conv2d(*SHAPES[1]), WISHES))


def test_defaults_per_device_class(fake_handle):
    """An AVX-512 CPU gets 16-wide vectors, an AVX2 CPU 8-wide ones, a GPU scalar work-items with
    filters staged in local memory: each default valid in that device's space."""
    tiled = registry().get("direct.Tiled")
    problem = Problem.conv2d((8, 64, 56, 56), (64, 64, 3, 3), padding=1)
    expected = {"avx512": (16, 0), "avx2": (8, 0), "gpu": (1, 1)}
    for kind, (width, local) in expected.items():
        handle = fake_handle(kind)
        config = tiled.default_config(problem, handle)
        assert (config["VW"], config["USE_LOCAL"]) == (width, local)
        assert tiled.config_space(problem, handle).refusal(config) is None
        assert tiled.check_config(problem, handle, config) == []
    assert set(TILED_DEFAULT_CONFIGS) >= {"cpu/vector16", "cpu", "gpu", "*"}


def test_workspace_is_the_relaid_filters():
    """The workspace is one float per filter value, whatever the direction or config."""
    tiled = registry().get("direct.Tiled")
    for direction in (Direction.FORWARD, Direction.BACKWARD_DATA):
        problem = Problem.conv2d((2, 6, 9, 9), (8, 3, 3, 3), groups=2, direction=direction)
        assert tiled.workspace(problem) == 8 * 3 * 3 * 3 * 4
