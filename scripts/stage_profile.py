"""Where a solver's time goes: each kernel of its invoker timed by its own profiling event.

For each layer, direction and solver: the invoker of the solver's default config (and of each
--config), one warm-up call, then --runs calls; per kernel name the
median over the calls of its summed event time and its launch count, and the whole call's span
(first start to last end).  With torch and CUDA present, cuDNN's time for the same problem
(benchmark mode, TF32 off) beside it.  --set MODULE.NAME=VALUE replaces a module constant
before anything is built (e.g. convsolve_winograd.plan.CHUNK_BYTES=67108864) to try a change
without editing the plugin.  --sweep N times N configs drawn from the solver's config space
(those its check_config accepts) by their spans and prints the fastest beside the default.
Run on the GPU machine:

    scripts/bench_gpu.sh exec python3 scripts/stage_profile.py --solvers winograd.F4x3

Kernel names come from wrapping pyopencl.enqueue_nd_range_kernel; other commands (fills,
copies, Kernel.__call__) show as their command type.
"""
import argparse
import importlib
import json
import random
import statistics
import sys
from collections import defaultdict

import pyopencl as cl
from convsolve import Buffers, Direction, Handle, Problem, registry
from convsolve.solvers.calls import build_invoker, config_refusal, space_of, workspace_of
from convsolve.testing import device_buffers, random_tensors
from igemm_gpu_sweep import cuda_ms, torch_call  # scripts/, beside this file

#: (name, x shape at batch N, w shape, stride, padding[, groups]): ResNet-50 v1.5's stem, 3x3
#: layers and 1x1 layers (56x56 to 7x7; "up" to 4x the channels, "down" back), VGG-16's 3x3
#: layers, MobileNet-v2's stem, pointwise layers and depthwise ones, ConvNeXt-T's 7x7
#: depthwise layers and EfficientNet-B0's 5x5 depthwise ones.
LAYERS = {
    "mb.stem": ((3, 224, 224), (32, 3, 3, 3), 2, 1),
    "mb.pw32x16.112": ((32, 112, 112), (16, 32, 1, 1), 1, 0),
    "mb.pw192x32.28": ((192, 28, 28), (32, 192, 1, 1), 1, 0),
    "mb.pw64x384.14": ((64, 14, 14), (384, 64, 1, 1), 1, 0),
    "mb.pw960x160.7": ((960, 7, 7), (160, 960, 1, 1), 1, 0),
    "r50.stem": ((3, 224, 224), (64, 3, 7, 7), 2, 3),
    "r50.l1.3x3": ((64, 56, 56), (64, 64, 3, 3), 1, 1),
    "r50.l2.3x3s2": ((128, 56, 56), (128, 128, 3, 3), 2, 1),
    "r50.l2.3x3": ((128, 28, 28), (128, 128, 3, 3), 1, 1),
    "r50.l3.3x3s2": ((256, 28, 28), (256, 256, 3, 3), 2, 1),
    "r50.l4.3x3s2": ((512, 14, 14), (512, 512, 3, 3), 2, 1),
    "r50.l3.3x3": ((256, 14, 14), (256, 256, 3, 3), 1, 1),
    "r50.l4.3x3": ((512, 7, 7), (512, 512, 3, 3), 1, 1),
    "r50.l1.1x1up": ((64, 56, 56), (256, 64, 1, 1), 1, 0),
    "r50.l1.1x1down": ((256, 56, 56), (64, 256, 1, 1), 1, 0),
    "r50.l2.1x1up": ((128, 28, 28), (512, 128, 1, 1), 1, 0),
    "r50.l2.1x1down": ((512, 28, 28), (128, 512, 1, 1), 1, 0),
    "r50.l3.1x1up": ((256, 14, 14), (1024, 256, 1, 1), 1, 0),
    "r50.l3.1x1down": ((1024, 14, 14), (256, 1024, 1, 1), 1, 0),
    "r50.l4.1x1up": ((512, 7, 7), (2048, 512, 1, 1), 1, 0),
    "r50.l4.1x1down": ((2048, 7, 7), (512, 2048, 1, 1), 1, 0),
    "r50.l2.ds": ((256, 56, 56), (512, 256, 1, 1), 2, 0),
    "r50.l3.ds": ((512, 28, 28), (1024, 512, 1, 1), 2, 0),
    "r50.l4.ds": ((1024, 14, 14), (2048, 1024, 1, 1), 2, 0),
    "vgg.3x3.256": ((256, 56, 56), (256, 256, 3, 3), 1, 1),
    "vgg.3x3.512": ((512, 28, 28), (512, 512, 3, 3), 1, 1),
    **{f"mb.dw{c}.{h}{'s2' if s == 2 else ''}": ((c, h, h), (c, 1, 3, 3), s, 1, c)
       for c, h, s in ((32, 112, 1), (96, 112, 2), (144, 56, 1), (144, 56, 2), (192, 28, 1),
                       (192, 28, 2), (384, 14, 1), (576, 14, 1), (576, 14, 2), (960, 7, 1))},
    **{f"cnx.dw{c}.{h}": ((c, h, h), (c, 1, 7, 7), 1, 3, c)
       for c, h in ((96, 56), (192, 28), (384, 14), (768, 7))},
    **{f"eff.dw{c}.{h}{'s2' if s == 2 else ''}": ((c, h, h), (c, 1, 5, 5), s, 2, c)
       for c, h, s in ((144, 56, 2), (240, 28, 1), (480, 14, 1), (672, 14, 1), (672, 14, 2),
                       (1152, 7, 1))},
}
DIRECTIONS = {"fwd": Direction.FORWARD, "bwd": Direction.BACKWARD_DATA,
              "wrw": Direction.BACKWARD_WEIGHTS}
_NAMES = {}


def _record_names():
    """Remember each kernel launch's function name by its event."""
    enqueue = cl.enqueue_nd_range_kernel

    def named(queue, kernel, *args, **kwargs):
        event = enqueue(queue, kernel, *args, **kwargs)
        _NAMES[event.int_ptr] = kernel.function_name
        return event
    cl.enqueue_nd_range_kernel = named


def _set(assignment):
    """Apply one --set MODULE.NAME=VALUE (VALUE a Python literal)."""
    target, value = assignment.split("=", 1)
    module, name = target.rsplit(".", 1)
    setattr(importlib.import_module(module), name, eval(value, {}))


def profile(invoker, buffers, scratch, runs, back_to_back=False):
    """{kernel: (median ms, launches)} and the median span of a call, after one warm-up; with
    ``back_to_back`` the runs are enqueued together and waited for once (as a framework runs
    them: on a CPU a wait between calls lets PoCL's threads sleep)."""
    cl.wait_for_events(invoker(buffers, scratch))
    calls = [invoker(buffers, scratch) for _ in range(runs)] if back_to_back else None
    per_call, spans = [], []
    for run in range(runs):
        events = calls[run] if calls else invoker(buffers, scratch)
        cl.wait_for_events(events)
        sums, counts = defaultdict(float), defaultdict(int)
        for event in events:
            name = _NAMES.get(event.int_ptr, str(event.command_type))
            sums[name] += (event.profile.end - event.profile.start) * 1e-6
            counts[name] += 1
        per_call.append((sums, counts))
        spans.append((events[-1].profile.end - events[0].profile.start) * 1e-6)
    names = list(per_call[0][0])
    return ({n: (statistics.median(s[n] for s, _ in per_call), per_call[0][1][n])
             for n in names}, statistics.median(spans))


def sweep(solver, problem, handle, buffers, scratch, args, default):
    """Time ``args.sweep`` configs of ``solver``'s space that its check_config accepts (the
    default first); print the fastest few and return the record."""
    space = space_of(solver, problem, handle)   # the hooks as find calls them (any signature)
    configs = [default] + [c for c in space.sample(args.sweep * 4, random.Random(0))
                           if c != default and not config_refusal(solver, problem, handle, c,
                                                                  space)]
    timed = []
    for config in configs[:args.sweep + 1]:
        invoker = build_invoker(solver, problem, handle, config)
        timed.append((profile(invoker, buffers, scratch, args.runs, args.back_to_back)[1],
                      config))
    best = sorted(timed, key=lambda pair: pair[0])
    print(f"  {solver.name} sweep of {len(timed)}: default {timed[0][0]:.3f} ms; best " +
          "; ".join(f"{ms:.3f} {config}" for ms, config in best[:3]), flush=True)
    return {"solver": solver.name, "config": "sweep", "default_ms": timed[0][0],
            "timed": [{"ms": ms, "config": config} for ms, config in best]}


def cudnn_ms(problem, host, runs):
    """cuDNN's median time for ``problem``, 10 calls back to back a sample (None without torch
    and CUDA)."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    return cuda_ms(torch, torch_call(torch, problem, host, torch.float32), runs, calls=10)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--solvers", required=True, help="comma-separated solver names")
    parser.add_argument("--layers", default="r50.l2.3x3", help=f"of {', '.join(LAYERS)}")
    parser.add_argument("--directions", default="fwd,bwd,wrw")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--layout", default="NCHW", help="of every tensor (NCHW or NHWC)")
    parser.add_argument("--set", action="append", default=[], metavar="MODULE.NAME=VALUE")
    parser.add_argument("--config", action="append", default=[], metavar="K=V,K=V",
                        help="configs to time besides the default (keys merged into it)")
    parser.add_argument("--sweep", type=int, default=0, metavar="N",
                        help="also time N configs drawn from the config space, report the best")
    parser.add_argument("--back-to-back", action="store_true",
                        help="enqueue the runs of a config together, one wait (CPUs)")
    parser.add_argument("--json", help="write the records here")
    args = parser.parse_args()
    for assignment in args.set:
        _set(assignment)
    _record_names()
    handle, solvers, records = Handle(profiling=True), registry(), []
    print(f"device: {handle.name}  sets: {args.set}", flush=True)
    for layer in args.layers.split(","):
        x_shape, w_shape, stride, pad, *groups = LAYERS[layer]
        for dname in args.directions.split(","):
            problem = Problem.conv2d((args.batch, *x_shape), w_shape, stride=stride,
                                     padding=pad, groups=(groups or [1])[0],
                                     direction=DIRECTIONS[dname], layout=args.layout)
            host = random_tensors(problem, 0)
            buffers = device_buffers(handle, host)
            reference = cudnn_ms(problem, host, args.runs)
            print(f"{layer} {dname} b{args.batch}: cuDNN "
                  f"{'-' if reference is None else f'{reference:.3f}'} ms", flush=True)
            for name in args.solvers.split(","):
                solver = solvers.get(name)
                if not solver.is_applicable(problem):
                    print(f"  {name}: not applicable")
                    continue
                size = workspace_of(solver, problem, handle)
                scratch = handle.scratch(size, name) if size else None
                default = solver.default_config(problem, handle) \
                    if hasattr(solver, "default_config") else None
                variants = [("default", default)] + [
                    (text, {**default, **{k: eval(v, {}) for k, v in
                                          (kv.split("=") for kv in text.split(","))}})
                    for text in args.config]
                for label, config in variants:
                    refusal = config and config_refusal(solver, problem, handle, config)
                    if refusal:   # a config of another direction or problem class
                        print(f"  {name} [{label}] refused: {refusal}")
                        continue
                    invoker = build_invoker(solver, problem, handle, config)
                    stages, span = profile(invoker, Buffers(**buffers), scratch, args.runs,
                                           args.back_to_back)
                    print(f"  {name} [{label}] span {span:.3f} ms, workspace "
                          f"{size / 2**20:.1f} MiB")
                    for kernel, (ms, count) in stages.items():
                        print(f"    {kernel:32s} {ms:8.3f} ms  x{count}")
                    records.append({"layer": layer, "direction": dname, "solver": name,
                                    "config": label, "span_ms": span, "cudnn_ms": reference,
                                    "stages": stages, "sets": args.set})
                if args.sweep:
                    records.append(sweep(solver, problem, handle, Buffers(**buffers), scratch,
                                         args, default) | {"layer": layer, "direction": dname})
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"device": handle.name, "records": records}, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
