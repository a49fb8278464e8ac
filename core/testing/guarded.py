"""check_solver's runs on guarded buffers: each buffer followed by a guard zone of NaN words, what
was written there, and the wait for a run with a time limit.

On a device, reads past a buffer into its guard zone give NaN, which shows in any output they
reach, and writes there change its words.  On a simulator (Oclgrind) buffers have their exact
size and no guard zone, so that every access past one is the simulator's report.
"""
import numpy as np
import pyopencl as cl

from ..arith import round_up
from ..device.timing import RunTimeout, wait

#: Bytes of guard zone after each buffer on a device.
GUARD_BYTES = 4096
#: The word that fills guard zones, workspaces and unwritten outputs: a signalling NaN, so that
#: a value read from it makes a product NaN, and a value computed from it (arithmetic gives a
#: quiet NaN) differs from it when written back.
PATTERN = np.uint32(0x7FA5A5A5)


class Hung(Exception):
    """A run whose kernels did not finish within the time limit: the device queue of this
    process stays blocked by them."""


def guard_bytes(handle):
    """The guard zone after each buffer on ``handle``'s device: none on a simulator."""
    return 0 if handle.is_simulator else GUARD_BYTES


def allocate(handle, nbytes, array=None):
    """A device buffer of ``nbytes`` (whole words) and a guard zone, all PATTERN but for
    ``array``'s values (float32) at its start."""
    size = max(round_up(nbytes, 4) + guard_bytes(handle), 4)
    buffer = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, size)
    cl.enqueue_fill_buffer(handle.queue, buffer, PATTERN, 0, size)
    if array is not None and array.size:
        cl.enqueue_copy(handle.queue, buffer, np.ascontiguousarray(array, np.float32))
    return buffer


def tensors(handle, arrays, blank=()):
    """{name: allocate(...)} of float32 ``arrays``, those named in ``blank`` left PATTERN (so
    that an output's unwritten elements are NaN)."""
    return {name: allocate(handle, array.nbytes, None if name in blank else array)
            for name, array in arrays.items()}


def changed(handle, buffer, start, stop):
    """The byte offsets of the words of ``buffer`` in [start, stop) (multiples of 4) that are
    no longer PATTERN."""
    data = np.empty(max(stop - start, 0) // 4, np.uint32)
    if data.size:
        cl.enqueue_copy(handle.queue, data, buffer, src_offset=start)
    return start + 4 * np.flatnonzero(data != PATTERN)


def overruns(handle, buffers, sizes, output, where):
    """A message per buffer of ``buffers`` whose guard zone was written (``sizes``: its bytes;
    ``output``: the output's name, the others are inputs)."""
    failures = []
    for name, buffer in buffers.items():
        nbytes = sizes[name]
        written = changed(handle, buffer, nbytes, nbytes + guard_bytes(handle))
        if written.size:
            role = "output" if name == output else "input"
            failures.append(f"{where}: wrote past its {role} {name!r} (a tensor of {nbytes} "
                            f"bytes; byte {written[0]} written)")
    return failures


def finish(events, limit_s, where):
    """Wait for a run's ``events``, at most ``limit_s`` seconds (None: no limit); Hung after."""
    try:
        wait(events, limit_s)
    except RunTimeout:
        raise Hung(f"{where}: hung: its kernels did not finish within {limit_s:g} s; they block "
                   "this process's device queue, which is unusable now (check_solver(..., "
                   "isolate=True) runs them in a worker process, killed when hung)") from None
