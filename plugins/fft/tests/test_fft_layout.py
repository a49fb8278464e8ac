"""layout.py: axes (phases, taps, lengths), the workspace and its chunks (device-free)."""
import pytest
from convsolve import Direction, Problem
from convsolve_fft import layout
from convsolve_fft.transforms import spectrum_size


@pytest.mark.parametrize("fil, stride, dil, phases, step, taps", [
    (5, 1, 1, 1, 1, 5), (7, 2, 1, 2, 1, 4), (1, 2, 1, 1, 1, 1), (3, 2, 2, 1, 2, 3),
    (2, 3, 1, 2, 1, 1), (3, 4, 3, 4, 1, 2), (3, 3, 1, 3, 1, 1)])
def test_polyphase_axes(fil, stride, dil, phases, step, taps):
    """Phases are the residues i * d mod s the taps take (each tap alone when the dilated filter
    fits in a stride), taps per phase ceil(span / s)."""
    axis = layout.make_axis(Direction.FORWARD, 20, (20 - (fil - 1) * dil - 1) // stride + 1, fil,
                            0, stride, dil)
    assert (axis.phases, axis.step, axis.taps) == (phases, step, taps)
    residues = {i * dil % stride for i in range(fil)}
    assert residues <= {a * step for a in range(phases)}


def test_transform_lengths_exploit_padding():
    """A same-padded 5x5 layer on 28 x 28 takes 30-point transforms in every direction (the
    padding absorbs the wrap-around), not 32."""
    for direction in Direction:
        lay = layout.Layout(Problem.conv2d((8, 192, 28, 28), (32, 192, 5, 5), padding=2,
                                           direction=direction))
        assert (lay.h.length, lay.w.length) == (30, 30)


def test_backward_weights_transforms_hold_every_tap():
    """Backward-weights writes one point per tap, so a single tile's transform is at least as
    long as the taps, also where the padding would allow a shorter one (a dilated 1x7 over 5
    columns padded 4 and 5: 13 taps, where the data and the outputs need 10 points)."""
    problem = Problem.conv2d((2, 3, 2, 5), (4, 3, 1, 7), padding=((0, 0), (4, 5)), dilation=2)
    assert layout.Layout(problem).w.length == 10
    axis = layout.Layout(problem.with_direction(Direction.BACKWARD_WEIGHTS)).w
    assert axis.taps == 13 and axis.length >= 13


@pytest.mark.parametrize("direction", list(Direction), ids=lambda d: d.value)
def test_workspace_formula(direction):
    """Workspace = (K * Cg' + chunk * tiles * (C' + K)) spectra of 2 * Fp floats, Cg' and C'
    counting phase channels; the chunk keeps the image spectra within CHUNK_BUDGET_BYTES."""
    problem = Problem.conv2d((500, 32, 30, 30), (48, 16, 5, 5), stride=2, padding=2, groups=2,
                             direction=direction)
    lay = layout.Layout(problem)
    f, fp = spectrum_size(lay.h.length, lay.w.length)
    assert lay.phases == 4 and lay.cg == 16 * 4 and lay.fp == fp >= f
    spectra = 48 * 64 + lay.chunk * (32 * 4 + 48)
    assert lay.workspace == spectra * 2 * fp * 4
    assert lay.chunk * (32 * 4 + 48) * 2 * fp * 4 <= layout.CHUNK_BUDGET_BYTES
    assert (lay.chunk + 1) * (32 * 4 + 48) * 2 * fp * 4 > layout.CHUNK_BUDGET_BYTES
    assert 1 < len(lay.chunks()) and sum(images for _, images in lay.chunks()) == 500


def test_huge_problems_do_not_fit():
    """Workspaces past MAX_WORKSPACE_BYTES (or 2**31 floats) are declined."""
    assert not layout.Layout(Problem.conv2d((1, 2048, 64, 64), (2048, 2048, 9, 9))).fits()
