"""Real 1-D, 3-D and channels-last configurations (C3D, R3D, R(2+1)D, X3D, a 3-D U-Net block,
wav2vec2, a conformer, a TCN; ResNet and MobileNet layers in NHWC and mixed layouts), every
direction, every installed solver that applies, checked against float64 with its default config
and one random config, each check printed: the correctness sweep of the rank and layout kernels
on the device CONVSOLVE_DEVICE picks (issue 31's H200 runs).

    python3 scripts/rank_layout_sweep.py [SOLVER_SUBSTRING ...]   (none: every solver)
"""
import sys
import time

import convsolve
from convsolve import Direction, Handle, Problem
from convsolve.testing import check_problem

#: (name, maker, x, w, stride, padding, dilation, groups), logical shapes.
CASES = [
    # 3-D: C3D / R3D-18 / R(2+1)D / X3D / 3-D U-Net / odd
    ("c3d.conv1", Problem.conv3d, (2, 3, 8, 28, 28), (16, 3, 3, 3, 3), 1, 1, 1, 1),
    ("r3d.stem", Problem.conv3d, (1, 3, 8, 32, 32), (16, 3, 3, 7, 7), (1, 2, 2), (1, 3, 3), 1, 1),
    ("r3d.down", Problem.conv3d, (2, 16, 4, 14, 14), (32, 16, 1, 1, 1), 2, 0, 1, 1),
    ("r2p1d.t", Problem.conv3d, (1, 24, 8, 14, 14), (16, 24, 3, 1, 1), 1, (1, 0, 0), 1, 1),
    ("x3d.dw", Problem.conv3d, (2, 24, 5, 9, 9), (24, 1, 3, 3, 3), (1, 2, 2), 1, 1, 24),
    ("unet3d.asym", Problem.conv3d, (1, 8, 7, 10, 9), (12, 8, 3, 3, 3), 1, ((1, 1), (0, 2), (2, 0)), 1, 1),
    ("3d.dil.groups", Problem.conv3d, (1, 8, 9, 8, 7), (6, 4, 3, 2, 3), (2, 1, 1), 1, (2, 1, 2), 2),
    # 1-D: wav2vec2 / conformer / TCN / odd
    ("w2v.conv0", Problem.conv1d, (2, 1, 400), (32, 1, 10), 5, 0, 1, 1),
    ("w2v.conv1", Problem.conv1d, (2, 32, 79), (32, 32, 3), 2, 0, 1, 1),
    ("w2v.pos", Problem.conv1d, (1, 64, 49), (64, 4, 16), 1, ((8, 7),), 1, 16),
    ("conformer.dw", Problem.conv1d, (2, 48, 37), (48, 1, 31), 1, 15, 1, 48),
    ("tcn.dil", Problem.conv1d, (1, 16, 60), (24, 16, 3), 1, ((8, 0),), 4, 1),
    ("1d.odd", Problem.conv1d, (3, 5, 23), (7, 5, 4), 3, ((2, 1),), 2, 1),
    # 2-D channels-last and mixed
    ("r50.3x3", Problem.conv2d, (2, 32, 14, 14), (32, 32, 3, 3), 1, 1, 1, 1),
    ("r50.s2", Problem.conv2d, (2, 16, 15, 13), (24, 16, 3, 3), 2, ((1, 0), (0, 1)), 1, 1),
    ("r50.1x1s2", Problem.conv2d, (2, 32, 14, 14), (64, 32, 1, 1), 2, 0, 1, 1),
    ("mb.dw", Problem.conv2d, (2, 24, 17, 19), (24, 1, 3, 3), 2, 1, 1, 24),
    ("dil.groups", Problem.conv2d, (1, 12, 11, 9), (8, 3, 3, 3), 1, 2, 2, 4),
]
#: The layouts each rank's cases run in: channels-first (1-D and 3-D only: the 2-D cases are
#: NCHW layers elsewhere), channels-last, and x, y channels-last with channels-first weights.
LAYOUTS = {1: ("NCW", "NWC", {"x": "NWC", "w": "NCW", "y": "NWC"}),
           2: ("NHWC", {"x": "NHWC", "w": "NCHW", "y": "NHWC"}),
           3: ("NCDHW", "NDHWC", {"x": "NDHWC", "w": "NCDHW", "y": "NDHWC"})}


def main():
    handle, only = Handle(), sys.argv[1:]
    print(handle.device.name, flush=True)
    checks, failures, start = 0, 0, time.time()
    for name, make, x, w, stride, pad, dil, groups in CASES:
        for layout in LAYOUTS[len(x) - 2]:
            for direction in Direction:
                problem = make(x, w, stride, pad, dil, groups, direction, layout=layout)
                for solver in convsolve.registry().candidates(problem)[0]:
                    if only and not any(part in solver.name for part in only):
                        continue
                    found = check_problem(solver, handle, problem, configs=1)
                    checks, failures = checks + 1, failures + bool(found)
                    print(f"{checks} {name} {layout} {direction.value} {solver.name}: "
                          f"{'FAIL ' + found[0][:300] if found else 'ok'}", flush=True)
    print(f"{checks} checks, {failures} failing, {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
