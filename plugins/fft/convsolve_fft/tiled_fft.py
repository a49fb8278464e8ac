"""fft.TiledFft: overlap-save over spatial tiles, so large images need no whole-image transforms."""
import functools
import itertools

from .layout import Layout, problem_axis
from .solver import FftSolver, estimated_time

#: Transform lengths a tile may take: even, smooth (factors 2, 3, 5, 7), 8 to 64 points.
TILE_LENGTHS = (8, 10, 12, 14, 16, 18, 20, 24, 28, 30, 32, 36, 40, 42, 48, 50, 56, 60, 64)


class TiledFft(FftSolver):
    name = "fft.TiledFft"

    def layout(self, problem):
        return _tiled(problem)


@functools.lru_cache(maxsize=256)
def _tiled(problem):
    """The tiling with the least estimated time (solver.estimated_time) over TILE_LENGTHS on
    both axes, or None when it has a single tile (fft.Fft2d's layout) or no length fits."""
    taps = [problem_axis(problem, dim).taps for dim in (0, 1)]   # a tile reaches past them
    h_axes, w_axes = ([problem_axis(problem, dim, n) for n in TILE_LENGTHS if n > taps[dim]]
                      for dim in (0, 1))
    best = None
    for axes in itertools.product(h_axes, w_axes):   # none when an axis has no length
        layout = Layout(problem, axes=axes)
        if layout.tiles > 1 and layout.fits():
            time = estimated_time(layout)
            if best is None or time < best[0]:
                best = (time, layout)
    return best and best[1]
