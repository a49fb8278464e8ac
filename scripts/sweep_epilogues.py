#!/usr/bin/env python3
"""Every fusing solver, fused against unfused, on the real layers of the shipped suites.

    .venv/bin/python scripts/sweep_epilogues.py [--suites resnet50,vgg16] [--solvers direct.,gemm.]

For each layer of the suites (every shipped one by default: DeepBench, MobileNet-v2, ResNet-50,
VGG-16, the tiny one) at batch 1 (2 for every third layer), in each direction, every installed
solver with a ``fused_stages`` hook that takes the layer runs the fullest epilogue of the
direction (forward: scale, bias, residual with z being y, leaky relu, blend; backward: alpha
and blend) through ``convsolve.run`` fused (its own name) and unfused (``<name>/unfused``: the
bare convolution, then the core's pass).  The two must agree within the solver's tolerance and
have their NaNs in the same places; the unfused one is the reference here, so the sweep checks
the fused stores at real sizes and nothing else (check_solver checks the convolutions).  Prints
a line per layer and the disagreements at the end; exits 1 when there is one.  Runs on any
OpenCL device (CONVSOLVE_DEVICE).
"""
import argparse
import sys
import time

import convsolve
import numpy as np
import pyopencl as cl
from convsolve import Epilogue, registry
from convsolve.bench.command import layer_problem, load_suite, suite_names
from convsolve.solvers.registry import solver_attribute
from convsolve.testing import device_buffers, random_tensors, read_output, relative_error

FORWARD = Epilogue(True, True, True, "leaky_relu", True)
BACKWARD = Epilogue(blend=True)


def _values(handle, problem, rng):
    """The epilogue's values for ``problem`` (z is added by the caller: the output's buffer)."""
    values = {"alpha": -1.25, "beta": 0.5}
    if problem.epilogue.scale:
        flags = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
        scale, bias = (cl.Buffer(handle.context, flags, hostbuf=rng.uniform(
            -1, 1, problem.k).astype(np.float32)) for _ in range(2))
        values.update(scale=scale, bias=bias, z_scale=0.5, activation=("leaky_relu", 0.1))
    return values


def disagreement(handle, name, problem, host, values):
    """Why ``name`` fused and unfused disagree on ``problem``, or None."""
    outputs = []
    for candidate in (name, name + "/unfused"):
        buffers = device_buffers(handle, host)
        z = {"z": buffers["y"]} if problem.epilogue.residual else {}
        try:
            convsolve.run(handle, problem, candidate, **buffers, **values, **z)
        except convsolve.ConvsolveError as exc:
            return f"{candidate}: {exc}"
        outputs.append(read_output(handle, problem, buffers))
    error = relative_error(*outputs)
    tolerance = solver_attribute(registry().get(name), "tolerance")
    if not np.array_equal(np.isnan(outputs[0]), np.isnan(outputs[1])):
        return "NaNs in other places"
    return None if error < tolerance else f"relative error {error:.3g} >= {tolerance:g}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suites", help="comma-separated suite names (default: every one)")
    parser.add_argument("--solvers", help="comma-separated prefixes of solver names")
    parser.add_argument("--verbose", action="store_true", help="name each run before it runs")
    args = parser.parse_args(argv)
    handle, rng, start = convsolve.Handle(), np.random.default_rng(0), time.time()
    suites = args.suites.split(",") if args.suites else suite_names()
    prefixes = tuple(args.solvers.split(",")) if args.solvers else ("",)
    solvers = {name: solver for name, solver in registry().solvers.items()
               if name.startswith(prefixes) and callable(getattr(solver, "fused_stages", None))}
    layers = [layer for suite in suites for layer in load_suite(suite)["layers"]]
    print(f"device: {handle.name}; {len(layers)} layers of {', '.join(suites)}; "
          f"{len(solvers)} solvers")
    checked, wrong = 0, []
    for index, layer in enumerate(layers):
        for direction in ("fwd", "bwd", "wrw"):
            bare = layer_problem(layer, 1 + (index % 3 == 0), direction)
            problem = bare.with_epilogue(FORWARD if direction == "fwd" else BACKWARD)
            host, values = random_tensors(problem, index), _values(handle, problem, rng)
            for name, solver in solvers.items():
                if problem.direction in solver.directions and solver.is_applicable(bare):
                    if args.verbose:
                        print(f"  {name} {problem.key()}", flush=True)
                    why = disagreement(handle, name, problem, host, values)
                    checked += 1
                    if why:
                        wrong.append(f"{name} {problem.key()}: {why}")
            handle.forget_rankings()
        print(f"layer {index} {layer.get('name', '')}: {checked} checked, {len(wrong)} "
              f"disagree, {time.time() - start:.0f} s", flush=True)
    print("\n".join(["disagreements:", *wrong] if wrong else ["no disagreement"]))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
