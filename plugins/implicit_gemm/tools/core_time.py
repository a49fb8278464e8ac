"""Per-core CPU time of a suite's layers: PyTorch (one thread) against convsolve solvers (PoCL,
one thread), robust to a machine shared with others, where wall-clock comparisons are not.

Each layer's call is timed with getrusage (user + system time of the whole process), best of 5
after 2 warm-ups.  Run each side in its own process, then compare:

    MALLOC_MMAP_THRESHOLD_=1073741824 MALLOC_TRIM_THRESHOLD_=1073741824 \\
        .venv/bin/python plugins/implicit_gemm/tools/core_time.py torch fwd /tmp/torch.json
    POCL_MAX_PTHREAD_COUNT=1 .venv/bin/python plugins/implicit_gemm/tools/core_time.py \\
        convsolve fwd /tmp/ours.json --solvers implicit_gemm.Fwd,gemm.Im2ColGemm,gemm.Gemm1x1
    .venv/bin/python plugins/implicit_gemm/tools/core_time.py table fwd /tmp/torch.json /tmp/ours.json
"""
import argparse
import json
import resource
from functools import partial
from pathlib import Path

SUITES = Path(__file__).resolve().parents[3] / "core" / "bench" / "suites"


def cpu_ms(call, repeats=5):
    """Best CPU time of ``call`` in ms, after two untimed calls."""
    call()
    call()
    best = float("inf")
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_SELF)
        call()
        after = resource.getrusage(resource.RUSAGE_SELF)
        best = min(best, (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime))
    return best * 1e3


def _run(wait, invoker, buffers, scratch):
    wait(invoker(buffers, scratch))


def torch_times(layers, direction, batch):
    import torch
    torch.set_num_threads(1)
    nn = torch.nn
    times = {}
    for layer in layers:
        x = torch.randn(batch, layer["c"], layer["h"], layer["w"])
        w = torch.randn(layer["k"], layer["c"] // layer["groups"], layer["r"], layer["s"])
        args = {"stride": layer["stride"], "padding": layer["pad"],
                "dilation": layer["dilation"], "groups": layer["groups"]}
        y = nn.functional.conv2d(x, w, **args)
        calls = {"fwd": partial(nn.functional.conv2d, x, w, **args),
                 "bwd": partial(nn.grad.conv2d_input, x.shape, w, y, **args),
                 "wrw": partial(nn.grad.conv2d_weight, x, w.shape, y, **args)}
        with torch.no_grad():
            times[layer["name"]] = cpu_ms(calls[direction])
    return times


def convsolve_times(layers, direction, batch, solvers):
    import convsolve
    import pyopencl as cl
    from convsolve import Buffers
    from convsolve.testing import device_buffers, random_tensors
    handle, registry, times = convsolve.Handle(), convsolve.registry(), {}
    for layer in layers:
        problem = convsolve.Problem.conv2d(
            (batch, layer["c"], layer["h"], layer["w"]),
            (layer["k"], layer["c"] // layer["groups"], layer["r"], layer["s"]),
            stride=tuple(layer["stride"]), padding=tuple(layer["pad"]),
            dilation=tuple(layer["dilation"]), groups=layer["groups"], direction=direction)
        buffers = Buffers(**device_buffers(handle, random_tensors(problem, 0)))
        times[layer["name"]] = {}
        for name in solvers:
            solver = registry.get(name)
            if problem.direction not in solver.directions or not solver.is_applicable(problem):
                continue
            size = solver.workspace(problem)
            scratch = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, size) if size else None
            invoker = handle.invoker(solver, problem, solver.default_config(problem, handle)
                                     if hasattr(solver, "config_space") else None)
            times[layer["name"]][name] = cpu_ms(
                partial(_run, cl.wait_for_events, invoker, buffers, scratch))
    return times


def table(layers, torch_file, ours_file):
    torch_ms = json.loads(Path(torch_file).read_text())
    ours = json.loads(Path(ours_file).read_text())
    names = sorted({name for times in ours.values() for name in times})
    print("| layer | count | torch | " + " | ".join(names) + " |")
    totals = dict.fromkeys(["torch", *names], 0.0)
    for layer in layers:
        row, count = ours[layer["name"]], layer["count"]
        totals["torch"] += count * torch_ms[layer["name"]]
        for name in names:
            totals[name] += count * row.get(name, float("inf"))
        print(f"| {layer['name']} | {count} | {torch_ms[layer['name']]:.1f} | " + " | ".join(
            f"{row[n]:.1f}" if n in row else "-" for n in names) + " |")
    print("| total | | " + " | ".join(f"{totals[n]:.1f}" for n in totals) + " |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("side", choices=("torch", "convsolve", "table"))
    parser.add_argument("direction", choices=("fwd", "bwd", "wrw"))
    parser.add_argument("files", nargs="+", help="output json (torch, convsolve); or both (table)")
    parser.add_argument("--suite", default="resnet50")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--solvers", default="implicit_gemm.Fwd,gemm.Im2ColGemm")
    args = parser.parse_args()
    layers = json.loads((SUITES / f"{args.suite}.json").read_text())["layers"]
    if args.side == "table":
        table(layers, *args.files)
        return
    times = (torch_times(layers, args.direction, args.batch) if args.side == "torch" else
             convsolve_times(layers, args.direction, args.batch, args.solvers.split(",")))
    Path(args.files[0]).write_text(json.dumps(times, indent=1))


if __name__ == "__main__":
    main()
