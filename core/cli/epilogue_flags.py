"""`convsolve conv` and `explain` with epilogues: the activation and residual flags, random
epilogue values, verification with the epilogue, and -b 1's backward-bias."""
import statistics

import numpy as np
import pyopencl as cl

from .. import reference
from ..device.tensors import read_tensor
from ..device.timing import elapsed_ms
from ..engine.bias_grad import backward_bias
from ..engine.verify import error_against_reference
from ..epilogue import Activation, Epilogue
from ..errors import ValidationError
from ..problem import Direction
from .driver_args import parse_args, parse_file

#: Relative RMS error backward-bias must stay under (a tree sum: ~1e-7 on large layers).
BIAS_TOLERANCE = 1e-5


def add_flags(parser):
    """convsolve's epilogue flags of conv and explain (forward problems only)."""
    flag = parser.add_argument
    flag("--activation", metavar="MODE", help="fuse an activation into the forward output: "
         "identity, logistic, tanh, relu, softrelu, abs, power, clipped_relu, leaky_relu, elu "
         "(or MIOpen's name or number)")
    flag("--activation-params", metavar="A[,B[,G]]", help="the activation's parameters "
         "(MIOpen's activAlpha, activBeta, activGamma; default: the mode's)")
    flag("--residual", action="store_true", help="add a residual tensor z (random) to the "
         "forward output before the activation, as ResNet's shortcut")


def structure(problem, args):
    """``problem`` with the epilogue the flags ask for (-b 1's bias kept).  They join the forward
    convolution's: a command that runs none (-F without 1, -m trans, a backward --key) is
    refused, as the backward directions take alpha and beta only (docs/epilogues.md)."""
    activation = _activation(args)
    if (args.residual or activation is not None) and not _runs_forward(problem, args):
        flag = ("--activation", args.activation) if activation else ("--residual", True)
        raise ValidationError(*flag, "it applies to a forward convolution's output; backward-"
                              "data and backward-weights take alpha and beta only (docs/"
                              "epilogues.md): ask for -F 1 (alone or with others), no -m trans")
    if problem.direction is not Direction.FORWARD or not (
            args.residual or activation is not None or problem.epilogue is not None):
        return problem
    bias = problem.epilogue is not None and problem.epilogue.bias
    return problem.with_epilogue(Epilogue(bias=bias, residual=args.residual, activation=(
        activation.mode if activation else "identity")))


def _runs_forward(problem, args):
    """Whether the command ``problem`` comes from runs a (not transposed) forward convolution:
    the command line's, or the --file line that holds it; an --key problem is its own."""
    if getattr(args, "key", None):
        return problem.direction is Direction.FORWARD
    commands = ([parse_args(args.driver_flags)] if not getattr(args, "file", None) else
                [c for _, _, c in parse_file(args.file) if not isinstance(c, ValidationError)
                 and any(p is problem for p in c.problems)])   # the same parse as cli.py's
    return all(Direction.FORWARD in c.requested and not c.transposed for c in commands)


def _activation(args):
    params = getattr(args, "activation_params", None)
    if getattr(args, "activation", None) is None:
        if params:
            raise ValidationError("--activation-params", params, "needs --activation")
        return None
    try:
        numbers = [float(p) for p in params.split(",")] if params else []
    except ValueError:
        raise ValidationError("--activation-params", params, "expected A[,B[,G]]") from None
    if len(numbers) > 3:
        raise ValidationError("--activation-params", params, "expected at most 3 numbers")
    return Activation(args.activation, *numbers)


def epilogue_args(handle, problem, args, rng):
    """(find's and run's epilogue keywords, their host arrays) of random values for
    ``problem``'s epilogue ({}, {} without one)."""
    structure = problem.epilogue
    if structure is None:
        return {}, {}
    host = {"activation": _activation(args) or Activation(structure.activation)}
    if structure.bias:
        host["bias"] = rng.uniform(-1, 1, problem.k).astype(np.float32)
    if structure.residual:
        host["z"] = rng.uniform(-1, 1, problem.y.shape).astype(np.float32)
    flags = cl.mem_flags.READ_ONLY | cl.mem_flags.COPY_HOST_PTR
    device = {name: cl.Buffer(handle.context, flags, hostbuf=array) if isinstance(
        array, np.ndarray) else array for name, array in host.items()}
    return device, host


def error(problem, host, values_host, output):
    """Relative RMS error of ``output`` against the reference with the epilogue
    (verify.error_against_reference)."""
    return error_against_reference(problem, host, output, **values_host)


def bias_report(handle, problem, host, buffers, command):
    """-b 1 on a backward problem: db of its dy, timed (-t) and verified (-V) as the
    convolution is."""
    db = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, 4 * problem.k)
    report = {}
    runs = [backward_bias(handle, problem.y, dy=buffers["y"], db=db)
            for _ in range(command.iterations if command.time else 1)]
    if command.time:
        report["time_ms"] = statistics.median(elapsed_ms(events) for events in runs)
    if command.verify:
        cl.wait_for_events(runs[-1])
        got = read_tensor(handle, type(problem.y)((problem.k,)), db)
        expected = reference.backward_bias(reference.logical(problem.y, host["y"]))
        err = reference.relative_error(got, expected)
        report["verify"] = {"ok": bool(err < BIAS_TOLERANCE), "error": err,
                            "tolerance": BIAS_TOLERANCE}
    return report


def print_bias(report):
    """The text lines of a -b 1 backward-bias report."""
    if "time_ms" in report:
        print(f"Backward Bias: {report['time_ms']:.4f} ms (median of runs)")
    verify = report.get("verify")
    if verify:
        state = "Verifies OK on CPU reference" if verify["ok"] else "FAILED:"
        print(f"Backward Bias {state} ({verify['error']:.3g} "
              f"{'<' if verify['ok'] else '>'} {verify['tolerance']:g})")
