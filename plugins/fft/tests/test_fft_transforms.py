"""transforms.py and the fft2d kernels: sizes, plans, 2-D real transforms against numpy's
(test_fft_*: plugins share one test session, so module names must not collide)."""
import numpy as np
import pyopencl as cl
import pytest
from convsolve_fft import transforms
from convsolve_fft.layout import upload


def test_smooth_sizes_and_plans():
    """Even lengths whose halves factor into 2, 3, 5, 7; plans use exactly those radices."""
    assert [transforms.smooth_even(n) for n in (1, 7, 23, 29, 31, 45)] == [2, 8, 24, 30, 32, 48]
    assert transforms.radices(2 * 3 * 5 * 7 * 16) == [7, 5, 3, 4, 4, 2]
    assert transforms.radices(16, radix4=False) == [2, 2, 2, 2]
    assert not transforms.is_smooth(22) and transforms.is_smooth(98)


def test_twiddles_are_exact_to_float():
    """Twiddles come from double precision: each within half an ulp of float32."""
    twiddles = []
    transforms.plan_record(7 * 5 * 3 * 4, twiddles, post=True)
    values = np.array(twiddles)
    rounded = values.real.astype(np.float32) + 1j * values.imag.astype(np.float32)
    assert np.abs(rounded - values).max() < 6e-8


def _planes(images, fh, fw, rows, cols):
    """fft_planes record of `images` planes of rows x cols read whole into fh x fw transforms."""
    axis = (0, fh, 0, 0, 1, 0, 0, 1, rows), (0, fw, 0, 0, 1, 0, 0, 1, cols)
    record = [1, images, 1, 1, 1, 1, 0, rows * cols, 0, 1, 0, 0, 0, 0, images, images * rows * cols]
    return np.array(record + list(axis[0]) + list(axis[1]), np.int32), images


@pytest.mark.parametrize("fh, fw, lanes", [(2, 2, 16), (6, 10, 16), (14, 12, 8), (30, 42, 16),
                                           (20, 28, 1), (98, 50, 16)])
def test_forward_and_inverse_match_numpy(handle, fh, fw, lanes):
    """Spectra equal numpy's rfft along h then fft along w (in the fft2d kernels' frequency
    order), and the inverse gives the planes back, for non-power-of-two sizes and lane counts."""
    config = {"LANES": lanes, "WG": 1 if lanes > 1 else 16, "RADIX4": 1, "STREAM": 1}
    fft = transforms.Transform(handle, fh, fw, config)
    rng = np.random.default_rng(fh * fw)
    rows, cols, images = fh - 1, fw - 1, 3
    x = rng.uniform(-1, 1, (images, rows, cols)).astype(np.float32)
    flags = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
    tensor = cl.Buffer(handle.context, flags, hostbuf=x)
    spectra = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, images * 2 * fft.fp * 4)
    planes = upload(handle, _planes(images, fh, fw, rows, cols))
    fft.forward(tensor, 0, spectra, 0, planes).wait()
    raw = np.empty(images * 2 * fft.fp, np.float32)
    cl.enqueue_copy(handle.queue, raw, spectra)
    blocks = raw.reshape(fft.fp // 16, images, 2, 16)
    got = (blocks[:, :, 0] + 1j * blocks[:, :, 1]).transpose(1, 0, 2).reshape(images, fft.fp)
    padded = np.zeros((images, fh, fw))
    padded[:, :rows, :cols] = x
    want = np.fft.fft(np.fft.rfft(padded, axis=1), axis=2)          # (images, KH, FW)
    kh, order = fh // 2 + 1, []
    for k0 in range(0, kh, lanes):
        n = min(lanes, kh - k0)
        order += [(k0 + l, kw) for kw in range(fw) for l in range(n)]
    rows_, cols_ = zip(*order)
    assert np.abs(got[:, :len(order)] - want[:, rows_, cols_]).max() < 1e-5 * np.abs(want).max()
    assert not got[:, len(order):].any()
    back = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, x.nbytes)
    fft.inverse(spectra, 0, back, 0, planes).wait()
    y = np.empty_like(x)
    cl.enqueue_copy(handle.queue, y, back)
    assert np.abs(y - x).max() < 1e-5
