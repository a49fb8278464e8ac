"""Where a composite layout candidate's time goes on a device (engine/layouts.py).

For ResNet-50's 56x56 3x3 layer in NHWC (forward and backward-data) it times each of these (the
round of least event time of five, after two warm-up calls), printing its wall time and events:
  - the composite ``implicit_gemm.<dir>/nchw`` as the engine runs it (its copies sub-buffers of
    one scratch buffer, made per call);
  - the solver alone on channels-first buffers of its own;
  - the solver on sub-buffers at offset 0 of parents of their own, on kept sub-buffers of one
    parent, and on sub-buffers of one parent made per call;
  - the two transposes into plain buffers and into sub-buffers, and one into a sub-buffer
    released right after its enqueue (the release's host time printed).

    python3 scripts/composite_probe.py [BATCH]      (default 32; CONVSOLVE_DEVICE picks the device)
"""
import sys
import time

import convsolve
import pyopencl as cl
from convsolve import Buffers, Handle, Problem
from convsolve.arith import ALIGN, round_up
from convsolve.device.tensors import device_buffers, random_tensors
from convsolve.engine.layouts import Composite, _transposer, channels_first
from convsolve.solvers.calls import build_invoker


def timed(label, call, rounds=5):
    """Print the round of ``call`` (which returns its events) with the least event time."""
    for _ in range(2):
        cl.wait_for_events(call())
    best = None
    for _ in range(rounds):
        start = time.perf_counter()
        events = call()
        cl.wait_for_events(events)
        wall = (time.perf_counter() - start) * 1e3
        each = [(e.profile.end - e.profile.start) * 1e-6 for e in events]
        if best is None or sum(each) < sum(best[1]):
            best = (wall, each)
    print(f"  {label:44s} wall {best[0]:8.3f} ms  events {sum(best[1]):8.3f} ms: "
          + " ".join(f"{ms:.3f}" for ms in best[1]), flush=True)


def probe(handle, solver_name, problem):
    """The timings above for ``problem`` (channels-last) and the solver ``solver_name``."""
    solver = convsolve.registry().get(solver_name)
    composite = Composite(solver)
    buffers = Buffers(**device_buffers(handle, random_tensors(problem)))
    scratch = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, composite.workspace(problem,
                                                                                     handle))
    invoker = composite.build_invoker(problem, handle)
    timed("composite, sub-buffers of scratch", lambda: invoker(buffers, scratch))

    first = channels_first(problem)
    plain = Buffers(**device_buffers(handle, random_tensors(first)))
    inner = build_invoker(solver, first, handle)
    timed("solver alone, channels-first buffers", lambda: inner(plain, None))
    sizes = {name: getattr(problem, name).nbytes for name in "xwy"}
    own = {name: cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, size)
           for name, size in sizes.items()}
    at_zero = {name: own[name].get_sub_region(0, size) for name, size in sizes.items()}
    timed("solver on sub-buffers at offset 0", lambda: inner(Buffers(**at_zero), None))
    offsets, end = {}, 0
    for name, size in sizes.items():
        offsets[name], end = end, round_up(end + size, ALIGN)
    parent = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, end)
    kept = {name: parent.get_sub_region(offsets[name], size) for name, size in sizes.items()}
    timed("solver on kept sub-buffers of one parent", lambda: inner(Buffers(**kept), None))
    timed("solver on sub-buffers made per call", lambda: inner(Buffers(**{
        name: parent.get_sub_region(offsets[name], size) for name, size in sizes.items()}), None))

    transpose = _transposer(problem, handle)
    timed("transposes x in, y out, plain buffers", lambda: [
        transpose("x", buffers.x, plain.x, False), transpose("y", plain.y, buffers.y, True)])
    timed("transposes x in, y out, kept sub-buffers", lambda: [
        transpose("x", buffers.x, kept["x"], False), transpose("y", kept["y"], buffers.y, True)])
    releases = []

    def released():
        copy = parent.get_sub_region(0, sizes["x"])
        events = [transpose("x", buffers.x, copy, False)]
        start = time.perf_counter()
        copy.release()
        releases.append(time.perf_counter() - start)
        return events
    timed("transpose into a sub-buffer released at once", released)
    print(f"  its release: median {sorted(releases)[len(releases) // 2] * 1e3:.3f} ms of host time",
          flush=True)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 32
    handle = Handle(profiling=True)
    print(handle.device.name, f"batch {n}")
    for label, name, direction in (("forward", "implicit_gemm.Fwd", "fwd"),
                                   ("backward-data", "implicit_gemm.BwdData", "bwd")):
        print(f"{label}, 56x56 64 -> 64 3x3, NHWC")
        probe(handle, name, Problem.conv2d((n, 64, 56, 56), (64, 64, 3, 3), 1, 1,
                                           direction=direction, layout="NHWC"))


if __name__ == "__main__":
    main()
