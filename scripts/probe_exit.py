#!/usr/bin/env python3
"""Exit codes of convsolve programs, each run in a fresh process: which use, if any, makes the
OpenCL library crash at process exit (RELIABILITY.md: NVIDIA's, after long runs).  Each child
runs with faulthandler on, so a crash prints the Python stack of every thread.

    python3 scripts/probe_exit.py [--repeat N] [CASE ...]   (on the GPU: scripts/bench_gpu.sh exec)

Exits 1 when any run of any case exits other than 0.
"""
import argparse
import subprocess
import sys

_SMALL = "import numpy as np, convsolve; x = np.ones((1, 3, 8, 8), np.float32); " \
         "w = np.ones((4, 3, 3, 3), np.float32); "
_FIND = "import gc, numpy as np, convsolve; x = np.ones((1, 16, 14, 14), np.float32); " \
        "w = np.ones((16, 16, 3, 3), np.float32); h = convsolve.Handle(); " \
        "convsolve.conv2d(x, w, padding=1, handle=h); "
#: Kernels whose arguments name buffers that were freed since: what a long run leaves in the
#: invokers a handle keeps.  KEEP kernels are kept; each is launched once on a buffer then freed.
_STALE = ("import pyopencl as cl; from convsolve.device.handle import choose_device; "
          "ctx = cl.Context([choose_device(None)]); q = cl.CommandQueue(ctx); "
          "src = '__kernel void k(__global float *y) { y[get_global_id(0)] = 1; }'; "
          "kept = []\n"
          "for i in range(KEEP):\n"
          "    k = cl.Program(ctx, src).build().k; b = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 4096)\n"
          "    k.set_arg(0, b); cl.enqueue_nd_range_kernel(q, k, (1024,), None); q.finish()\n"
          "    kept.append(k); b.release() if RELEASE else None; del b\n")
#: The numpy API as a long program uses it: many shapes, epilogues and transposed convolutions.
_LONG = ("import numpy as np, convsolve\n"
         "rng = np.random.default_rng(0)\n"
         "for i in range(CALLS):\n"
         "    n, c, k, s = 1 + i % 2, 4 + i % 4 // 2 * 4, 8, 7 + i % 8 // 4 * 6\n"
         "    x = rng.standard_normal((n, c, s, s), dtype=np.float32)\n"
         "    w = rng.standard_normal((k, c, 3, 3), dtype=np.float32)\n"
         "    b = rng.standard_normal(k, dtype=np.float32)\n"
         "    y = convsolve.conv2d(x, w, padding=1, stride=1 + i % 2, bias=b, activation='relu')\n"
         "    convsolve.conv_transpose2d(y, w, stride=1 + i % 2, padding=1)\n"
         "    convsolve.conv2d_backward_weights(y, x, w.shape, padding=1, stride=1 + i % 2)\n")
CASES = {
    "pyopencl only": "import pyopencl as cl; from convsolve.device.handle import choose_device; "
                     "ctx = cl.Context([choose_device(None)]); "
                     "q = cl.CommandQueue(ctx); b = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 64); "
                     "cl.Program(ctx, '__kernel void k(__global float *y) { y[0] = 1; }')"
                     ".build().k(q, (1,), None, b); q.finish()",
    "a handle": "import convsolve; h = convsolve.Handle()",
    "conv2d, a named solver": _SMALL + "h = convsolve.Handle(); "
                              "convsolve.conv2d(x, w, padding=1, handle=h, solver='direct.NaiveFwd')",
    "conv2d, the default handle": _SMALL + "convsolve.conv2d(x, w, padding=1, "
                                  "solver='direct.NaiveFwd')",
    "conv2d after find": _FIND,
    "conv2d after find, handle deleted": _FIND + "h.queue.finish(); del h; gc.collect()",
    "backward bias": "import numpy as np, convsolve; h = convsolve.Handle(); "
                     "convsolve.conv2d_backward_bias(np.ones((2, 4, 8, 8), np.float32), handle=h)",
    "kernels kept, their buffers freed": _STALE.replace("KEEP", "500").replace("RELEASE", "0"),
    "kernels kept, their buffers released": _STALE.replace("KEEP", "500").replace("RELEASE", "1"),
    "kernels freed before exit, buffers freed first": _STALE.replace("KEEP", "500").replace(
        "RELEASE", "0") + "del kept, k; import gc; gc.collect(); print('freed')",
    "a long numpy-API program": _LONG.replace("CALLS", "400"),
    "a long numpy-API program, handles not released at exit": (
        "import atexit\nfrom convsolve.device import handle\natexit.unregister(handle.release_all)\n"
        + _LONG.replace("CALLS", "400")),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs of each case (3)")
    parser.add_argument("cases", nargs="*", help="case names (all)")
    args = parser.parse_args()
    bad = 0
    for name, code in CASES.items():
        if args.cases and name not in args.cases:
            continue
        runs = [subprocess.run([sys.executable, "-X", "faulthandler", "-c", code],
                               capture_output=True, text=True, check=False)
                for _ in range(args.repeat)]
        codes = [run.returncode for run in runs]
        bad += any(codes)
        print(f"{name:48s} exit codes {codes}", flush=True)
        for run in runs:
            if run.returncode:
                print("    | " + "\n    | ".join(run.stderr.strip().splitlines()[-40:]), flush=True)
                break
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
