"""Time implicit_gemm's GPU kernel on real layers, config by config, against torch cuDNN.

For each layer and direction: cuDNN's time (torch, benchmark mode, TF32 off, CUDA events), the
time of implicit_gemm's default config and of each candidate config the device accepts (OpenCL
profiling events, median of --runs after a warm-up), and the error of the default and the
fastest against float64 (torch on the GPU).  With --regs, the registers and spills NVIDIA's
compiler reports (-cl-nv-verbose) for each direction and candidate.  Run on the GPU machine:

    scripts/bench_gpu.sh exec python3 scripts/igemm_gpu_sweep.py --out $OUT/igemm.json

Writes the records to --out (JSON) and prints one line per layer and direction.
"""
import argparse
import json
import re
import statistics
import sys
import time

import convsolve
import numpy as np
import pyopencl as cl
from convsolve import Buffers, Direction, Problem
from convsolve.testing import device_buffers, random_tensors, read_output
from convsolve_implicit_gemm import configs, plan

#: (name, x shape at batch N, w shape, stride, padding): ResNet-50 v1.5 and VGG-16 layers.
LAYERS = [
    ("r50.l1.3x3", (64, 56, 56), (64, 64, 3, 3), 1, 1),
    ("r50.l2.3x3", (128, 28, 28), (128, 128, 3, 3), 1, 1),
    ("r50.l2.3x3s2", (128, 56, 56), (128, 128, 3, 3), 2, 1),
    ("r50.l3.3x3", (256, 14, 14), (256, 256, 3, 3), 1, 1),
    ("r50.l4.3x3", (512, 7, 7), (512, 512, 3, 3), 1, 1),
    ("r50.l1.1x1.256-64", (256, 56, 56), (64, 256, 1, 1), 1, 0),
    ("r50.l1.1x1.64-256", (64, 56, 56), (256, 64, 1, 1), 1, 0),
    ("r50.l2.1x1.512-128", (512, 28, 28), (128, 512, 1, 1), 1, 0),
    ("r50.l3.1x1.1024-256", (1024, 14, 14), (256, 1024, 1, 1), 1, 0),
    ("r50.l4.1x1.512-2048", (512, 7, 7), (2048, 512, 1, 1), 1, 0),
    ("r50.l4.1x1.2048-512", (2048, 7, 7), (512, 2048, 1, 1), 1, 0),
    ("vgg.3x3.256", (256, 56, 56), (256, 256, 3, 3), 1, 1),
    ("vgg.3x3.512", (512, 28, 28), (512, 512, 3, 3), 1, 1),
]
#: Candidate blocks (BM, BN, TM, TN), each with BK 8 and 16, VW 4, double-buffered.
BLOCKS = [(128, 128, 8, 8), (128, 128, 8, 16), (128, 128, 16, 8), (256, 64, 16, 4),
          (256, 64, 8, 8), (64, 256, 8, 8), (64, 256, 4, 16), (256, 128, 16, 8),
          (128, 256, 8, 16), (128, 64, 8, 4), (128, 64, 8, 8), (64, 128, 4, 8),
          (64, 128, 8, 8), (64, 64, 4, 4), (64, 64, 8, 8), (32, 128, 4, 8), (128, 32, 8, 4),
          (256, 32, 16, 4), (32, 256, 4, 16)]
DIRECTIONS = {"fwd": Direction.FORWARD, "bwd": Direction.BACKWARD_DATA,
              "wrw": Direction.BACKWARD_WEIGHTS}
SOLVERS = {"fwd": "implicit_gemm.Fwd", "bwd": "implicit_gemm.BwdData", "wrw": "implicit_gemm.Wrw"}


def candidates():
    """The candidate configs in the space (complete)."""
    space, out = configs.space(), []
    for bm, bn, tm, tn in BLOCKS:
        for bk in (8, 16):
            config = configs.complete({"LOCAL": 1, "BM": bm, "BN": bn, "BK": bk, "TM": tm,
                                       "TN": tn, "VW": 4, "DOUBLE_BUF": 1})
            if config in space:
                out.append(config)
    return out


def short(config):
    """A config as BMxBN/TMxTN/BK[/VW, single buffer]."""
    text = f"{config['BM']}x{config['BN']}/{config['TM']}x{config['TN']}/k{config['BK']}"
    return text + ("" if config["VW"] == 4 else f"/v{config['VW']}") + (
        "" if config["DOUBLE_BUF"] else "/1buf")


def ocl_ms(invoker, buffers, scratch, runs):
    """Median event time of ``invoker`` in ms after one warm-up."""
    cl.wait_for_events(invoker(buffers, scratch))
    times = []
    for _ in range(runs):
        events = invoker(buffers, scratch)
        cl.wait_for_events(events)
        times.append((events[-1].profile.end - events[0].profile.start) * 1e-6)
    return statistics.median(times)


def torch_call(torch, problem, host, dtype):
    """A callable computing ``problem``'s output with torch on the GPU in ``dtype``."""
    dev = {k: torch.from_numpy(v).to("cuda", dtype) for k, v in host.items()}
    (pt, _), (pl, _) = problem.conv.pads
    stride, dilation = list(problem.conv.strides), list(problem.conv.dilations)
    if problem.direction is Direction.FORWARD:
        return lambda: torch.nn.functional.conv2d(dev["x"], dev["w"], None, stride, [pt, pl],
                                                  dilation, problem.groups)
    data = problem.direction is Direction.BACKWARD_DATA
    return lambda: torch.ops.aten.convolution_backward(
        dev["y"], dev["x"], dev["w"], None, stride, [pt, pl], dilation, False, [0, 0],
        problem.groups, [data, not data, False])[0 if data else 1]


def cuda_ms(torch, call, runs, calls=1):
    """Median CUDA-event time of ``call`` in ms after warm-ups: each sample ``calls`` calls
    back to back between two events, divided by ``calls``."""
    for _ in range(3):
        call()
    times = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            call()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / calls)
    return statistics.median(times)


def registers(handle, problem, config):
    """(registers, spill bytes) NVIDIA's compiler reports for ``config``'s kernel."""
    source = (plan.KERNELS / "igemm_local.cl").read_text()
    core = convsolve.__path__[0] + "/kernels"
    options = [f"-D{k}={v}" for k, v in plan.defines(problem, config).items()]
    options += [f"-I{plan.KERNELS}", f"-I{core}", "-cl-nv-verbose"]
    program = cl.Program(handle.context, source).build(options=options)
    log = program.get_build_info(handle.device, cl.program_build_info.LOG)
    regs = re.search(r"Used (\d+) registers", log)
    spill = re.search(r"(\d+) bytes spill stores", log)
    return (int(regs.group(1)) if regs else None, int(spill.group(1)) if spill else None)


def rel_error(result, expected):
    """max |result - expected| / max |expected|."""
    return float(np.max(np.abs(result - expected)) / max(np.max(np.abs(expected)), 1e-30))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--layers", default="", help="comma-separated names (default: all)")
    parser.add_argument("--directions", default="fwd,bwd,wrw")
    parser.add_argument("--defaults-only", action="store_true")
    parser.add_argument("--limit", type=int, default=0, help="the first LIMIT candidates only")
    parser.add_argument("--regs", action="store_true")
    args = parser.parse_args()
    import torch
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    handle = convsolve.Handle(profiling=True)
    registry = convsolve.registry()
    chosen = set(args.layers.split(",")) - {""}
    records = {"device": handle.device.name, "driver": handle.device.driver_version,
               "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
               "batch": args.batch, "rows": [], "registers": []}
    pool = [] if args.defaults_only else candidates()[:args.limit or None]
    for name, (c, h, w), wshape, stride, pad in LAYERS:
        if chosen and name not in chosen:
            continue
        for dname in args.directions.split(","):
            problem = Problem.conv2d((args.batch, c, h, w), wshape, stride=stride, padding=pad,
                                     direction=DIRECTIONS[dname])
            solver = registry.get(SOLVERS[dname])
            host = random_tensors(problem, 0)
            buffers = device_buffers(handle, host)
            size = solver.workspace(problem)
            scratch = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, size) if size else None
            flop = 2.0 * problem.y.size * (c // problem.groups) * wshape[2] * wshape[3]
            row = {"layer": name, "direction": dname, "gflop": flop * 1e-9,
                   "cudnn_ms": cuda_ms(torch, torch_call(torch, problem, host, torch.float32),
                                       args.runs), "times": {}}
            default = configs.default(problem, handle.device)
            row["default"] = short(default)
            for config in [default] + pool:
                key = short(config)
                if key in row["times"] or configs.refusals(problem, config, handle.device):
                    continue
                invoker = solver.build_invoker(problem, handle, config)
                row["times"][key] = ocl_ms(invoker, Buffers(**buffers), scratch, args.runs)
            best = min(row["times"], key=row["times"].get)
            row["best"] = best
            expected = torch_call(torch, problem, host, torch.float64)().cpu().numpy()
            for label, key in (("default", row["default"]), ("best", best)):
                config = next(c for c in [default] + pool if short(c) == key)
                cl.wait_for_events(solver.build_invoker(problem, handle, config)(
                    Buffers(**buffers), scratch))
                row[f"{label}_error"] = rel_error(read_output(handle, problem, buffers),
                                                  expected)
            records["rows"].append(row)
            t = row["times"]
            print(f"{name:22s} {dname} cudnn {row['cudnn_ms']:.3f} default {row['default']} "
                  f"{t[row['default']]:.3f} best {best} {t[best]:.3f} "
                  f"({row['cudnn_ms'] / t[best]:.2f}x, {flop / t[best] * 1e-6:.0f} GFLOP/s) "
                  f"err {row['default_error']:.1e}/{row['best_error']:.1e}", flush=True)
            if args.regs and name == LAYERS[1][0]:
                for config in [default] + pool:
                    records["registers"].append(
                        {"direction": dname, "config": short(config),
                         "regs_spill": registers(handle, problem, config)})
    with open(args.out, "w") as out:
        json.dump(records, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
