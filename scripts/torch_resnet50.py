#!/usr/bin/env python3
"""ResNet-50 in PyTorch on the CPU, its convolutions by convsolve.torch.replace_convs against
pure PyTorch (NCHW, and channels_last: its best CPU layout), in the same run: inference forward
passes at each --batches, one training step (forward, backward, SGD) at --train-batch; then each
distinct convolution alone, and the numpy API's zero-copy against copying, per layer.

The network is built from the shipped resnet50 suite (core/bench/suites/resnet50.json, made
from the shared layer table networks_conv.json; its members are torchvision's module names), so
torchvision is not needed: every convolution is the table's, with torchvision's batch norms,
ReLUs, max-pool, average-pool and fully connected head around them.  The models start from the
same weights.  Each pass is timed as a framework runs it: its first call alone (convsolve's find
runs there, once per shape and direction, on an empty find-db unless --db user; PyTorch makes its
oneDNN primitives), then in --rounds rounds each model runs --warmup untimed and --repeat timed
iterations back to back, the models taking turns by round so that load on the machine reaches
them alike; a time is the median of the timed iterations.  glibc's malloc thresholds are raised
as `convsolve bench` raises them for PyTorch (--malloc default leaves them: the process re-runs
itself to set them).  Prints Markdown: the set-up, then the tables.

    .venv/bin/python scripts/torch_resnet50.py                    # 2 cores: about 4 minutes
    .venv/bin/python scripts/torch_resnet50.py --rounds 5 --repeat 5 --layer-repeat 5
    .venv/bin/python scripts/torch_resnet50.py --image-size 64 --batches 1 --train-batch 2 \\
        --rounds 1 --repeat 1 --layer-batch 0     # a smoke run: seconds
"""
import argparse
import copy
import datetime
import os
import platform
import statistics
import sys
import tempfile
import time

import convsolve
import convsolve.torch
import numpy as np
import torch
import zero_copy
from convsolve.bench.command import layer_problem, load_suite
from convsolve.bench.torch_peer import MALLOC_FAIR
from torch import nn

#: Bottleneck blocks per stage of ResNet-50.
BLOCKS = (3, 4, 6, 3)
#: The models compared, the reference first.
MODELS = ("torch", "torch channels_last", "convsolve")


def conv_table(suite="resnet50"):
    """{torchvision module name: suite layer} for every convolution of the suite."""
    return {name: layer for layer in load_suite(suite)["layers"] for name in layer["members"]}


def _conv(table, name):
    """The table's convolution ``name`` as a torch.nn.Conv2d (no bias: a batch norm follows)."""
    layer = table[name]
    return nn.Conv2d(layer["c"], layer["k"], (layer["r"], layer["s"]),
                     stride=tuple(layer["stride"]), padding=tuple(layer["pad"]),
                     dilation=tuple(layer["dilation"]), groups=layer["groups"], bias=False)


class Bottleneck(nn.Module):
    """torchvision's v1.5 bottleneck: 1x1, 3x3 (strided), 1x1, with the table's convolutions."""

    def __init__(self, table, prefix):
        super().__init__()
        for index in (1, 2, 3):
            conv = _conv(table, f"{prefix}.conv{index}")
            setattr(self, f"conv{index}", conv)
            setattr(self, f"bn{index}", nn.BatchNorm2d(conv.out_channels))
        self.downsample = None
        if f"{prefix}.downsample.0" in table:
            down = _conv(table, f"{prefix}.downsample.0")
            self.downsample = nn.Sequential(down, nn.BatchNorm2d(down.out_channels))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = torch.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return torch.relu(y + (x if self.downsample is None else self.downsample(x)))


class ResNet50(nn.Module):
    """ResNet-50 v1.5 with torchvision's module names, its convolutions from the table."""

    def __init__(self, table, classes=1000):
        super().__init__()
        self.conv1, self.bn1 = _conv(table, "conv1"), nn.BatchNorm2d(64)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        for stage, blocks in enumerate(BLOCKS, 1):
            setattr(self, f"layer{stage}", nn.Sequential(*(
                Bottleneck(table, f"layer{stage}.{block}") for block in range(blocks))))
        self.fc = nn.Linear(2048, classes)

    def forward(self, x):
        x = self.maxpool(torch.relu(self.bn1(self.conv1(x))))
        for stage in range(1, 5):
            x = getattr(self, f"layer{stage}")(x)
        return self.fc(torch.flatten(x.mean((2, 3)), 1))


def layout(name, tensor):
    """``tensor`` in the memory layout of the model ``name`` (channels_last or NCHW)."""
    if name == "torch channels_last":
        return tensor.contiguous(memory_format=torch.channels_last)
    return tensor


def measure(steps, warmup, rounds, repeat):
    """({name: first call's seconds}, {name: the mean of the next ``warmup`` calls},
    {name: median seconds of the hot calls}, {name: the first call's result}) of ``steps``
    ({name: a call}): each step's first and warm-up calls back to back, then ``rounds`` rounds
    of ``repeat`` timed calls back to back per step, the steps taking turns."""
    first, warm, results, times = {}, {}, {}, {name: [] for name in steps}
    for name, step in steps.items():
        start = time.perf_counter()
        results[name] = step()
        first[name] = time.perf_counter() - start
        start = time.perf_counter()
        for _ in range(warmup):
            step()
        warm[name] = (time.perf_counter() - start) / max(warmup, 1)
    for _ in range(rounds):
        for name, step in steps.items():
            for _ in range(repeat):
                start = time.perf_counter()
                step()
                times[name].append(time.perf_counter() - start)
    return first, warm, {name: statistics.median(t) for name, t in times.items()}, results


def difference(got, expected):
    """Max-norm relative difference of two tensors, or of each pair of two tuples of them (as
    text, '/'-separated)."""
    if isinstance(got, tuple):
        return " / ".join(difference(a, b) for a, b in zip(got, expected))
    scale = expected.abs().max().clamp_min(1e-30)
    return f"{((got - expected).abs().max() / scale).item():.1e}"


def _inference(model, x):
    """A call running ``model`` on ``x`` in eval mode without autograd."""
    def call():
        model.eval()
        with torch.no_grad():
            return model(x)
    return call


def _training(model, x, label):
    """A call making one SGD training step of ``model`` on (x, label); it returns the loss and
    conv1's weight gradient, the last one backward computes."""
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)

    def call():
        model.train()
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), label)
        loss.backward()
        optimizer.step()
        return loss.detach(), model.conv1.weight.grad.clone()
    return call


def network_rows(models, args):
    """Markdown rows: each pass's first call and hot median per model, the speed against
    PyTorch's NCHW and channels_last, and the result's difference from PyTorch's NCHW."""
    size, passes = args.image_size, []
    for batch in (int(b) for b in args.batches.split(",") if b.strip()):
        x = torch.randn(batch, 3, size, size)
        passes.append((f"forward, batch {batch} (logits)", {
            name: _inference(model, layout(name, x)) for name, model in models.items()}))
    if args.train_batch:
        x = torch.randn(args.train_batch, 3, size, size)
        label = torch.randint(0, 1000, (args.train_batch,))
        title = f"training step, batch {args.train_batch} (loss / conv1's weight gradient)"
        passes.append((title, {
            name: _training(model, layout(name, x), label) for name, model in models.items()}))
    rows = []
    for title, steps in passes:
        first, warm, hot, results = measure(steps, args.warmup, args.rounds, args.repeat)
        for name in MODELS:
            rows.append(f"| {title} | {name} | {first[name] * 1e3:.0f} | {warm[name] * 1e3:.0f} | "
                        f"{hot[name] * 1e3:.1f} | "
                        f"{hot['torch'] / hot[name]:.2f} | "
                        f"{hot['torch channels_last'] / hot[name]:.2f} | "
                        f"{difference(results[name], results['torch'])} |")
            print(rows[-1], flush=True)
    return rows


#: Each model's convolution function, for the per-layer table.
FUNCTIONS = {"torch": nn.functional.conv2d, "torch channels_last": nn.functional.conv2d,
             "convsolve": convsolve.torch.conv2d}


def _layer_call(name, direction, x, w, grad, geometry):
    """A call of the model ``name``'s convolution: forward without autograd, or training
    (forward, then the gradients of x and w for ``grad``)."""
    x, w = (layout(name, t).requires_grad_() for t in (x, w))
    grad, function = layout(name, grad), FUNCTIONS[name]

    def call():
        if direction == "forward":
            with torch.no_grad():
                return function(x, w, **geometry)
        return torch.autograd.grad(function(x, w, **geometry), (x, w), grad)
    return call


def layer_rows(suite, args):
    """Markdown rows: each distinct convolution alone at --layer-batch, forward and training
    (forward, then backward for input and weight), per model; totals weighted by count."""
    totals = {(name, d): 0.0 for name in MODELS for d in ("forward", "training")}
    rows = []
    for layer in load_suite(suite)["layers"]:
        problem = layer_problem(layer, args.layer_batch, convsolve.Direction.FORWARD)
        geometry = {"stride": tuple(layer["stride"]), "padding": tuple(layer["pad"]),
                    "dilation": tuple(layer["dilation"]), "groups": layer["groups"]}
        tensors = (torch.randn(problem.x.shape), torch.randn(problem.w.shape) * 0.1,
                   torch.randn(problem.y.shape))
        times = {}
        for direction in ("forward", "training"):
            _, _, hot, _ = measure({name: _layer_call(name, direction, *tensors, geometry)
                                    for name in MODELS}, args.warmup, 1, args.layer_repeat)
            for name in MODELS:
                times[name, direction] = hot[name]
                totals[name, direction] += hot[name] * layer["count"]
        rows.append(_layer_row(f"{layer['name']} x{layer['count']}", times))
        print(rows[-1], flush=True)
    rows.append(_layer_row("network (x count)", totals))
    print(rows[-1], flush=True)
    return rows


def _layer_row(label, times):
    cells = []
    for direction in ("forward", "training"):
        cells += [f"{times[name, direction] * 1e3:.2f}" for name in MODELS]
        cells.append(f"{times['torch', direction] / times['convsolve', direction]:.2f}")
    return f"| {label} | " + " | ".join(cells) + " |"


def setup_lines(args, swapped):
    """The Markdown set-up list: machine, versions, command, date, load, find-db."""
    handle = convsolve.default_handle()
    with open("/proc/cpuinfo") as info:
        cpu = next((line.split(":", 1)[1].strip() for line in info
                    if line.startswith("model name")), platform.processor())
    now = datetime.datetime.now(datetime.timezone.utc)
    db = "the user" if args.db == "user" else "an empty"
    return [(f"- **Date:** {now:%Y-%m-%d %H:%M} UTC; load average at the start "
             f"{os.getloadavg()[0]:.2f}"),
            (f"- **CPU:** {cpu}, {os.cpu_count()} logical CPUs; **OpenCL:** "
             f"{handle.device.platform.version}, device `{handle.name}`"),
            (f"- **PyTorch:** {torch.__version__}, {torch.get_num_threads()} threads; "
             f"{len(swapped)} convolutions by convsolve; {args.image_size}x{args.image_size} "
             f"images; find mode {convsolve.env.FIND_MODE.raw()}, {db} find-db; malloc "
             f"{args.malloc}"),
            (f"- **Timing:** per model the first call, then {args.warmup} warm-up calls "
             f"(their mean), then {args.rounds} turns of {args.repeat} timed calls, the models "
             f"taking turns (median); layers: the same with 1 turn of {args.layer_repeat}"),
            "- **Command:** `" + " ".join(["python", *sys.argv]) + "`"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="1,8", help="forward batches, comma-separated")
    parser.add_argument("--train-batch", type=int, default=8, help="0: no training step")
    parser.add_argument("--warmup", type=int, default=zero_copy.SETTLE_CALLS,
                        help="calls after the first, before the timed ones (default: as many "
                        "as a new shape's online plan may time candidates on)")
    parser.add_argument("--rounds", type=int, default=3, help="turns each model takes")
    parser.add_argument("--repeat", type=int, default=3, help="timed calls a turn")
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--layer-batch", type=int, default=8,
                        help="batch of the per-layer and zero-copy tables; 0: neither")
    parser.add_argument("--layer-repeat", type=int, default=3)
    parser.add_argument("--find-mode", default=None, help="CONVSOLVE_FIND_MODE for the run")
    parser.add_argument("--db", choices=("fresh", "user"), default="fresh",
                        help="fresh: an empty find-db in a temporary directory (the first "
                        "call's cost as a new shape's); user: the user's find-db")
    parser.add_argument("--malloc", choices=("fair", "default"), default="fair")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    args = parser.parse_args(argv)
    if args.malloc == "fair" and any(os.environ.get(k) != v for k, v in MALLOC_FAIR.items()):
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **MALLOC_FAIR})
    if args.find_mode:
        os.environ["CONVSOLVE_FIND_MODE"] = args.find_mode
    if args.db == "fresh":
        scratch = tempfile.mkdtemp(prefix="torch_resnet50_")
        os.environ["CONVSOLVE_USER_DB_PATH"] = os.path.join(scratch, "find_db.sqlite")
        os.environ["CONVSOLVE_PERF_DB_PATH"] = os.path.join(scratch, "perf_db.sqlite")
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    reference = ResNet50(conv_table())
    models = {"torch": reference,
              "torch channels_last": copy.deepcopy(reference).to(
                  memory_format=torch.channels_last),
              "convsolve": copy.deepcopy(reference)}
    swapped = convsolve.torch.replace_convs(models["convsolve"])
    print("\n".join(setup_lines(args, swapped)) + "\n")
    print("| pass | model | first call ms | warm-up ms | hot ms | torch / it | "
          "torch channels_last / it | relative difference |\n"
          "| --- | --- | --- | --- | --- | --- | --- | --- |", flush=True)
    network_rows(models, args)
    if args.layer_batch:
        print(f"\nEach distinct convolution alone, batch {args.layer_batch}: forward "
              "(no_grad), and training (forward, then the gradients of input and weight), ms\n")
        print("| layer | forward: torch | channels_last | convsolve | torch / convsolve | "
              "training: torch | channels_last | convsolve | torch / convsolve |\n"
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |", flush=True)
        layer_rows("resnet50", args)
        print(f"\nThe numpy API's forward call, host arrays wrapped against copied, batch "
              f"{args.layer_batch} (scripts/zero_copy.py)\n")
        for line in zero_copy.table(convsolve.default_handle(), list(enumerate(
                load_suite("resnet50")["layers"])), args.layer_batch, args.layer_repeat,
                np.random.default_rng(0)):
            print(line, flush=True)
    print(f"\nload average at the end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
