"""fft.TiledFft: overlap-save tiles, against the reference in every direction."""
import pytest
from convsolve import Direction, Problem
from convsolve.testing import check_solver
from convsolve_fft import TiledFft, tiled_fft
from convsolve_fft.transforms import is_smooth
from fft_checks import assert_matches

#: Images large enough to be tiled: partial last tiles, strides (polyphase), dilation, groups,
#: asymmetric padding, even and non-square filters, batch 1 and 3.
SHAPES = [
    ((1, 2, 70, 90), (3, 2, 5, 5), 1, 2, 1, 1),
    ((3, 2, 41, 37), (2, 2, 4, 6), 1, ((3, 0), (1, 4)), 1, 1),
    ((2, 4, 45, 50), (4, 2, 7, 7), 2, 3, 1, 2),
    ((1, 3, 40, 44), (2, 3, 3, 5), (2, 3), ((0, 2), (2, 2)), (2, 1), 1),
    ((2, 2, 36, 33), (2, 1, 9, 9), 1, 4, 1, 2),
]


def test_conformance_on_the_standard_set(handle):
    """TiledFft passes check_solver where it tiles (the standard set's larger images)."""
    assert check_solver(TiledFft(), handle, configs=0) > 0


def test_tiled_shapes_match_the_reference(handle):
    """Each tiled shape, in every direction, is within the tolerance; every one is tiled."""
    for shape in SHAPES:
        assert TiledFft().layout(Problem.conv2d(*shape[:5], groups=shape[5])).tiles > 1
    assert assert_matches(handle, TiledFft(), SHAPES) == 3 * len(SHAPES)


@pytest.mark.parametrize("direction", list(Direction), ids=lambda d: d.value)
def test_large_images_take_smooth_tiles(direction):
    """A 161 x 700 image (DeepSpeech) runs in tiles of smooth transform lengths <= 64, whose
    windows cover every output exactly once."""
    problem = Problem.conv2d((2, 1, 161, 700), (32, 1, 5, 20), stride=2, direction=direction)
    layout = TiledFft().layout(problem)
    for axis in (layout.h, layout.w):
        assert axis.length <= max(tiled_fft.TILE_LENGTHS) and is_smooth(axis.length)
        assert axis.tile + axis.taps - 1 <= axis.length              # no wrap-around
        assert (axis.tiles - 1) * axis.tile < axis.extent <= axis.tiles * axis.tile


def test_single_tile_is_left_to_fft2d():
    """Where one tile covers the image TiledFft declines (fft.Fft2d is that case)."""
    assert not TiledFft().is_applicable(Problem.conv2d((1, 1, 5, 5), (1, 1, 3, 3)))
