#!/usr/bin/env python3
"""Exit codes of small convsolve programs, each run 3 times in a fresh process: which use, if
any, makes the OpenCL library crash at process exit (RELIABILITY.md: NVIDIA's, after long runs).

    python3 scripts/probe_exit.py [CASE ...]     (on the GPU: scripts/bench_gpu.sh exec ...)
"""
import subprocess
import sys

_SMALL = "import numpy as np, convsolve; x = np.ones((1, 3, 8, 8), np.float32); " \
         "w = np.ones((4, 3, 3, 3), np.float32); "
_FIND = "import gc, numpy as np, convsolve; x = np.ones((1, 16, 14, 14), np.float32); " \
        "w = np.ones((16, 16, 3, 3), np.float32); h = convsolve.Handle(); " \
        "convsolve.conv2d(x, w, padding=1, handle=h); "
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
}


def main(names):
    for name, code in CASES.items():
        if names and name not in names:
            continue
        runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               check=False)
                for _ in range(3)]
        last = (runs[-1].stderr.strip().splitlines() or [""])[-1][:160]
        print(f"{name:36s} exit codes {[run.returncode for run in runs]}  {last}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
