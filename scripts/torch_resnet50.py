#!/usr/bin/env python3
"""ResNet-50 in PyTorch on the CPU, its convolutions by convsolve.torch.replace_convs against
pure PyTorch, in the same run: forward passes at each --batches and one training step (SGD,
cross-entropy) at --train-batch.

The network is built from the shipped resnet50 suite (core/bench/suites/resnet50.json, made
from the shared layer table networks_conv.json; its members are torchvision's module names), so
torchvision is not needed: every convolution is the table's, with torchvision's batch norms,
ReLUs, max-pool, average-pool and fully connected head around them.  The two models start from
the same weights; each measurement alternates them pass by pass (so load on the machine reaches
both alike) after one warm-up pass each (convsolve's finds run there, once per shape).  Prints a
Markdown table (median ms over --repeat, torch / convsolve) and each output's relative
difference.

    .venv/bin/python scripts/torch_resnet50.py --batches 1,8 --train-batch 8 --repeat 5
    .venv/bin/python scripts/torch_resnet50.py --image-size 64 --batches 1 --train-batch 2 \\
        --repeat 1 --find-mode FAST      # a smoke run: seconds, not minutes
"""
import argparse
import copy
import os
import statistics
import sys
import time

import convsolve
import convsolve.torch
import torch
from convsolve.bench.command import load_suite
from torch import nn

#: Bottleneck blocks per stage of ResNet-50.
BLOCKS = (3, 4, 6, 3)


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


def _passes(models, step, repeat):
    """{name: median seconds of step(model)} over ``repeat`` alternating passes, after one
    warm-up each; and the warm-up's outputs."""
    outputs = {name: step(model) for name, model in models.items()}
    times = {name: [] for name in models}
    for _ in range(repeat):
        for name, model in models.items():
            start = time.perf_counter()
            step(model)
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}, outputs


def _difference(outputs):
    ours, theirs = outputs["convsolve"], outputs["torch"]
    return ((ours - theirs).abs().max() / theirs.abs().max().clamp_min(1e-30)).item()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="1,8", help="forward batches, comma-separated")
    parser.add_argument("--train-batch", type=int, default=8, help="0: no training step")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--find-mode", default=None, help="CONVSOLVE_FIND_MODE for the run")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    args = parser.parse_args(argv)
    if args.find_mode:
        os.environ["CONVSOLVE_FIND_MODE"] = args.find_mode
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    reference = ResNet50(conv_table())
    ours = copy.deepcopy(reference)
    swapped = convsolve.torch.replace_convs(ours)
    models = {"torch": reference, "convsolve": ours}
    size = args.image_size
    print(f"ResNet-50 ({len(swapped)} convolutions by convsolve on "
          f"{convsolve.default_handle().name}; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads), {size}x{size}, median of {args.repeat}\n")
    print("| pass | torch ms | convsolve ms | torch / convsolve | relative difference |")
    print("| --- | --- | --- | --- | --- |")

    def row(label, times, outputs):
        print(f"| {label} | {times['torch'] * 1e3:.1f} | {times['convsolve'] * 1e3:.1f} | "
              f"{times['torch'] / times['convsolve']:.2f} | {_difference(outputs):.1e} |",
              flush=True)
    for model in models.values():
        model.eval()
    with torch.no_grad():
        for batch in (int(b) for b in args.batches.split(",") if b.strip()):
            x = torch.randn(batch, 3, size, size)
            row(f"forward, batch {batch}", *_passes(models, lambda m, x=x: m(x), args.repeat))
    if args.train_batch:
        x = torch.randn(args.train_batch, 3, size, size)
        label = torch.randint(0, 1000, (args.train_batch,))
        optimizers = {model: torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
                      for model in models.values()}

        def train(model):
            model.train()
            optimizers[model].zero_grad()
            loss = nn.functional.cross_entropy(model(x), label)
            loss.backward()
            optimizers[model].step()
            return loss.detach()
        row(f"training step, batch {args.train_batch}", *_passes(models, train, args.repeat))
    return 0


if __name__ == "__main__":
    sys.exit(main())
