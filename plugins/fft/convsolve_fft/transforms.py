"""The plugin's own FFT: transform sizes, 1-D plans with twiddles computed in double, and the
launches of the fft2d and dft_small kernels."""
from importlib import resources

import numpy as np
import pyopencl as cl
from convsolve import ceil_div, round_up

KERNELS = resources.files(__package__) / "kernels"

#: The radices fft_common.cl implements. A length is planned as its factors 7, 5, 3, then 4s
#: (or 2s without RADIX4), then a last 2: each stage is one pass over the private buffers.
RADICES = (7, 5, 3, 4, 2)
#: The longest 1-D transform the kernels take (h: half of it, w: all of it): fft_common.cl's
#: MAXLEN, the capacity of its private buffers, so one build serves every transform size.
LONGEST = 256
#: Fields of fft_plan (fft_common.cl): n, stages, post, radix[16], twiddle[16].
MAX_STAGES = 16
PLAN_INTS = 3 + 2 * MAX_STAGES
#: Spectra hold Fp frequencies, F rounded up to this (the widest frequency vector of cgemm.cl).
SPECTRUM_ALIGN = 16


def is_smooth(n):
    """True when n > 0 has no prime factor but 2, 3, 5 and 7."""
    for p in (2, 3, 5, 7):
        while n % p == 0:
            n //= p
    return n == 1


def smooth_even(n):
    """The smallest even length >= n whose half is smooth (both transforms of a plane plan)."""
    m = max(1, ceil_div(n, 2))
    while not is_smooth(m):
        m += 1
    return 2 * m


def spectrum_size(fh, fw):
    """(F, Fp): frequencies of an fh x fw plane's half spectrum, and Fp, F rounded up."""
    f = (fh // 2 + 1) * fw
    return f, round_up(f, SPECTRUM_ALIGN)


def radices(n, radix4=True):
    """The stage radices of a length-n transform (n smooth)."""
    out = []
    for r in RADICES:
        if r == 4 and not radix4:
            continue
        while n % r == 0:
            out.append(r)
            n //= r
    return out


def plan_record(n, twiddles, post=False, radix4=True):
    """The fft_plan of length n; appends its twiddles (and, with ``post``, the real-input split
    factors exp(-2 pi i k / 2n), k <= n) to the list ``twiddles``."""
    record = np.zeros(PLAN_INTS, np.int32)
    stages = radices(n, radix4)
    record[0], record[1] = n, len(stages)
    ns = 1
    for s, r in enumerate(stages):
        record[3 + s], record[3 + MAX_STAGES + s] = r, len(twiddles)
        t, k = np.meshgrid(np.arange(1, r), np.arange(ns), indexing="ij")
        twiddles.extend(np.exp(-2j * np.pi * (t * k).ravel() / (ns * r)))
        ns *= r
    if post:
        record[2] = len(twiddles)
        twiddles.extend(np.exp(-2j * np.pi * np.arange(n + 1) / (2 * n)))
    return record


#: The dft_small kernels' capacities: support (taps) per axis, and KH = FH / 2 + 1.
SMALL_TAPS = 8
SMALL_KH = 48
#: The dft_small kernels' launches cap their work-items at this many per compute unit (each then
#: loops over several groups of planes): PoCL's cost per work-group was a third of the time of
#: 100,000 10x10 weight planes in one work-group each (README: performance).
SMALL_ITEMS_PER_UNIT = 256


def frequency_order(fh, fw, lanes):
    """The fft2d kernels' frequency order for ``lanes``: row f is (kh, kw) ((-1, -1) past F, up
    to Fp)."""
    kh_count, (_, fp) = fh // 2 + 1, spectrum_size(fh, fw)
    order = []
    for k0 in range(0, kh_count, lanes):
        n = min(lanes, kh_count - k0)
        order += [(k0 + q, kw) for kw in range(fw) for q in range(n)]
    return np.array(order + [(-1, -1)] * (fp - len(order)), np.int32)


def program(handle, fh, fw, config):
    """(the defines, a function giving a fresh Kernel by name) of the one program (fft.cl) of
    ``config``'s transforms for fh x fw planes: the fft2d pair, and the dft_small pair where
    fh / 2 + 1 <= SMALL_KH."""
    small = fh // 2 + 1 <= SMALL_KH
    defines = {"LANES": config["LANES"], "WG": config["WG"], "STREAM": config["STREAM"],
               "USE_LOCAL": int(in_local_memory(fh, fw, config["LANES"], handle.device)),
               "FFT_SMALL": int(small), **({"MAXTAPS": SMALL_TAPS} if small else {})}
    return defines, lambda name: handle.build(KERNELS / "fft.cl", name, defines)


def local_bytes(fh, fw, lanes):
    """Local memory the fft2d kernels take for an fh x fw plane (their `tmp`)."""
    kb, wb = ceil_div(fh // 2 + 1, lanes), ceil_div(fw, lanes)
    return max(kb * fw, kb * lanes * wb) * 2 * lanes * 4


def in_local_memory(fh, fw, lanes, device):
    """Whether the fft2d kernels keep an fh x fw plane between their passes in ``device``'s
    local memory (USE_LOCAL 1); larger planes go through their spectra in global memory."""
    return local_bytes(fh, fw, lanes) <= device.local_mem_size


class Transform:
    """Built fft2d kernels for fh x fw planes: their plans and twiddles on the device."""

    def __init__(self, handle, fh, fw, config):
        self.queue, self.fh, self.fw = handle.queue, fh, fw
        self.small_items = SMALL_ITEMS_PER_UNIT * handle.device.max_compute_units
        self.lanes, self.group = config["LANES"], config["WG"]
        twiddles = []
        plans = np.concatenate([plan_record(fh // 2, twiddles, True, config["RADIX4"]),
                                plan_record(fw, twiddles, False, config["RADIX4"])])
        pairs = np.array(twiddles, np.complex128)
        pairs = np.stack([pairs.real, pairs.imag], axis=1).astype(np.float32)
        flags = cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR
        self.plans = cl.Buffer(handle.context, flags, hostbuf=plans)
        self.twiddles = cl.Buffer(handle.context, flags, hostbuf=pairs)
        self.fp = spectrum_size(fh, fw)[1]
        self.scale = np.float32(1.0 / (fh * fw))
        defines, kernel_of = program(handle, fh, fw, config)
        use_local = defines["USE_LOCAL"]
        self.local = (cl.LocalMemory(local_bytes(fh, fw, self.lanes)),) if use_local else ()
        self.forward_kernel = kernel_of("fft2d_forward")
        self.inverse_kernel = kernel_of("fft2d_inverse")
        if defines["FFT_SMALL"]:
            self._build_small(handle, flags, kernel_of)

    def _build_small(self, handle, flags, kernel_of):
        """The dft_small kernels and their tables: exp(-2 pi i k t / n) for t < SMALL_TAPS."""
        def table(n, count):
            k, t = np.meshgrid(np.arange(count), np.arange(SMALL_TAPS), indexing="ij")
            e = np.exp(-2j * np.pi * k * t / n)
            return cl.Buffer(handle.context, flags, hostbuf=np.stack(
                [e.real, e.imag], axis=-1).astype(np.float32))
        self.eh, self.ew = table(self.fh, self.fh // 2 + 1), table(self.fw, self.fw)
        self.order = cl.Buffer(handle.context, flags,
                               hostbuf=frequency_order(self.fh, self.fw, self.lanes))
        self.small_kernels = [kernel_of(name) for name in ("dft_small_forward",
                                                           "dft_small_inverse")]

    def _launch_small(self, kernel, planes, args):
        kernel.set_args(*args)
        size = round_up(min(ceil_div(planes.count, self.lanes), self.small_items), self.group)
        return cl.enqueue_nd_range_kernel(self.queue, kernel, (size,), (self.group,))

    def small_forward(self, tensor, tensor_offset, spectra, spectra_offset, planes):
        """Like forward, for planes whose data lie within SMALL_TAPS rows and columns."""
        return self._launch_small(self.small_kernels[0], planes, (
            tensor, np.int32(tensor_offset), spectra, np.int32(spectra_offset), planes.buffer,
            np.int32(planes.count), self.eh, self.ew, self.order, np.int32(self.fh // 2 + 1),
            np.int32(self.fw), np.int32(self.fp)))

    def small_inverse(self, spectra, spectra_offset, tensor, tensor_offset, planes):
        """Like inverse, for planes written within SMALL_TAPS rows and columns."""
        return self._launch_small(self.small_kernels[1], planes, (
            spectra, np.int32(spectra_offset), tensor, np.int32(tensor_offset), planes.buffer,
            np.int32(planes.count), self.eh, self.ew, self.order, np.int32(self.fh // 2 + 1),
            np.int32(self.fw), np.int32(self.fp), self.scale))

    def _launch(self, kernel, planes, args):
        kernel.set_args(*args)
        return cl.enqueue_nd_range_kernel(self.queue, kernel, (planes * self.group,),
                                          (self.group,))

    def forward(self, tensor, tensor_offset, spectra, spectra_offset, planes):
        """Enqueue the spectra of a plane set (``planes``: its PlaneSet) from ``tensor``."""
        return self._launch(self.forward_kernel, planes.count, (
            tensor, np.int32(tensor_offset), spectra, np.int32(spectra_offset), planes.buffer,
            self.plans, self.twiddles, np.int32(self.fp), *self.local))

    def inverse(self, spectra, spectra_offset, tensor, tensor_offset, planes):
        """Enqueue the real planes of a plane set's spectra, written where it places them."""
        return self._launch(self.inverse_kernel, planes.count, (
            spectra, np.int32(spectra_offset), tensor, np.int32(tensor_offset), planes.buffer,
            self.plans, self.twiddles, np.int32(self.fp), self.scale, *self.local))
