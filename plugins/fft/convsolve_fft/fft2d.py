"""fft.Fft2d: each image plane in one transform (no tiles), for images up to 256 x 512."""
import functools

from .layout import Layout
from .solver import FftSolver, whole_image_fits


class Fft2d(FftSolver):
    name = "fft.Fft2d"

    def layout(self, problem):
        return _whole_image(problem)


@functools.lru_cache(maxsize=256)
def _whole_image(problem):
    layout = Layout(problem)
    return layout if whole_image_fits(layout) else None
