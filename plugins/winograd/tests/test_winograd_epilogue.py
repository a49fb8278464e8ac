"""convsolve-winograd's fused epilogue: the output transform stores all of it in every direction
(forward every stage, backward alpha and blend), with the bare problem's workspace, and computes
what the core's unfused pass does.  check_solver (test_winograd.py) runs the edge cases.

The problems are narrow enough (at most 4 tiles a row) to take the transforms' SMALL_RUN lanes,
whose kernels check_solver has built already: the cold-cache cost stays that of a few runs."""
import convsolve
import numpy as np
import pyopencl as cl
import pytest
from convsolve import Direction, Epilogue, Problem
from convsolve.testing import device_buffers, random_tensors, read_output
from convsolve_winograd import F2x3, F4x3, F6x3

SOLVERS = [F2x3(), F4x3(), F6x3()]
ALL = Epilogue(True, True, True, "leaky_relu", True)
#: Odd sizes, asymmetric padding, groups (forward-sense shapes; every direction of each).
PROBLEMS = [((3, 6, 7, 5), (9, 2, 3, 3), ((2, 0), (1, 2)), 3),
            ((2, 5, 6, 7), (3, 5, 3, 3), ((0, 1), (1, 0)), 1)]


def problems():
    return [Problem.conv2d(x, w, padding=pad, groups=g, direction=d)
            for d in Direction for x, w, pad, g in PROBLEMS]


def structure(direction):
    """The fullest epilogue of ``direction``: every stage forward, alpha and blend backward."""
    return ALL if direction is Direction.FORWARD else Epilogue(blend=True)


@pytest.mark.parametrize("solver", SOLVERS, ids=lambda s: s.name)
def test_fuses_every_stage_with_the_bare_workspace(solver, handle):
    """The hook answers every stage of the epilogue, an int, in each direction (forward all six
    of ALL, backward alpha and blend), and the workspace does not change with an epilogue."""
    for problem in problems():
        forward = problem.direction is Direction.FORWARD
        for epilogue in ([ALL, Epilogue(bias=True, activation="relu")] if forward
                         else [Epilogue(blend=True)]) + [Epilogue()]:
            fused = solver.fused_stages(problem.with_epilogue(epilogue))
            assert type(fused) is int and fused == len(epilogue.stages)
            assert solver.workspace(problem.with_epilogue(epilogue), handle) == \
                solver.workspace(problem, handle)
        assert solver.fused_stages(problem.with_epilogue(structure(problem.direction))) == (
            6 if forward else 2)


@pytest.mark.parametrize("problem", problems(), ids=lambda p: p.key())
def test_fused_equals_unfused(handle, problem):
    """Fused and unfused (the core's pass) give the same output within the tolerance, z being
    the output's own buffer and beta non-zero (its prior contents read and overwritten)."""
    problem = problem.with_epilogue(structure(problem.direction))
    out = problem.direction.output
    forward = problem.direction is Direction.FORWARD
    rng = np.random.default_rng(5)
    flags = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
    scale, bias = (cl.Buffer(handle.context, flags, hostbuf=rng.uniform(
        -1, 1, problem.k).astype(np.float32)) for _ in range(2))
    host = random_tensors(problem, 3)
    for solver in SOLVERS:
        outputs = []
        for name in (solver.name, solver.name + "/unfused"):
            buffers = device_buffers(handle, host)
            values = {"scale": scale, "bias": bias, "z": buffers[out], "z_scale": -0.75,
                      "activation": ("leaky_relu", 0.1)} if forward else {}
            convsolve.run(handle, problem, name, **buffers, alpha=-1.5, beta=0.5, **values)
            outputs.append(read_output(handle, problem, buffers))
        error = convsolve.testing.relative_error(*outputs)
        assert error < solver.tolerance, (solver.name, error)
        assert not np.array_equal(outputs[0], host[out])    # written, not left as it was
