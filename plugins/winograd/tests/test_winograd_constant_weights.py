"""convsolve-winograd with constant weights (build_packing): the filter transformed once, the
rest run from it, against the reference in forward and backward-data on odd sizes, groups and
asymmetric padding, within the packed buffer and the workspace, never reading w again."""
import numpy as np
import pyopencl as cl
import pytest
from convsolve import Buffers, Direction, Problem, reference
from convsolve.testing import guarded, random_tensors, read_output
from convsolve_winograd import F2x3, F4x3, F6x3

SOLVERS = [F2x3(), F4x3(), F6x3()]
SHAPES = [  # (x shape, w shape, padding, groups): stride 1, 3x3, as Winograd serves
    ((2, 5, 7, 9), (6, 5, 3, 3), ((1, 0), (2, 1)), 1),     # odd sizes, asymmetric padding
    ((1, 6, 6, 5), (4, 3, 3, 3), ((0, 2), (1, 1)), 2),     # groups
    ((1, 3, 11, 4), (17, 3, 3, 3), ((2, 2), (0, 0)), 1),   # rows past a U panel, a thin input
]
PROBLEMS = [Problem.conv2d(x, w, 1, pad, 1, g, direction)
            for direction in (Direction.FORWARD, Direction.BACKWARD_DATA)
            for x, w, pad, g in SHAPES]


@pytest.mark.parametrize("problem", PROBLEMS, ids=[p.key() for p in PROBLEMS])
@pytest.mark.parametrize("solver", SOLVERS, ids=[s.name for s in SOLVERS])
def test_packed_path_matches_the_reference(handle, solver, problem):
    """pack then invoker gives the reference's output within the solver's tolerance, writes
    nothing past the packed buffer or the workspace, and reads only the packed weights (w
    overwritten with NaN after packing changes nothing); two runs agree bit for bit."""
    assert solver.is_applicable(problem)
    packing = solver.build_packing(problem, handle, solver.default_config(problem, handle))
    host, out = random_tensors(problem, seed=3), problem.direction.output
    expected = reference.compute(problem, **host)
    buffers = guarded.tensors(handle, host, blank=(out,))
    packed = guarded.allocate(handle, packing.nbytes)
    workspace = solver.workspace(problem, handle)
    scratch = guarded.allocate(handle, workspace)
    cl.wait_for_events(packing.pack(buffers["w"], packed))
    cl.enqueue_fill_buffer(handle.queue, buffers["w"], np.float32(np.nan), 0, host["w"].nbytes)
    cl.wait_for_events(packing.invoker(Buffers(**buffers), scratch, packed))
    first = read_output(handle, problem, buffers)
    assert reference.relative_error(first, expected) < solver.tolerance
    assert not guarded.changed(handle, packed, packing.nbytes,
                               packing.nbytes + guarded.guard_bytes(handle)).size
    assert not guarded.changed(handle, scratch, workspace,
                               workspace + guarded.guard_bytes(handle)).size
    cl.wait_for_events(packing.invoker(Buffers(**buffers), scratch, packed))
    assert np.array_equal(read_output(handle, problem, buffers), first)


def test_backward_weights_packs_nothing(handle):
    """Backward-weights writes the filter: build_packing answers None."""
    problem = Problem.conv2d(*SHAPES[0][:2], 1, SHAPES[0][2],
                             direction=Direction.BACKWARD_WEIGHTS)
    solver = SOLVERS[0]
    assert solver.build_packing(problem, handle, solver.default_config(problem, handle)) is None


@pytest.mark.parametrize("name", ["winograd.F2x3", "winograd.F2x3/unfused"])
def test_epilogue_problems_run_from_packed_weights(handle, name):
    """Fused and unfused epilogue candidates (bias, residual, relu) transform the filter once,
    on the first of two calls, and give relu(conv + bias + z) from it."""
    import convsolve
    rng = np.random.default_rng(5)
    x, w = (rng.standard_normal(s).astype(np.float32) for s in ((1, 5, 7, 9), (6, 5, 3, 3)))
    bias, z = (rng.standard_normal(s).astype(np.float32) for s in ((6,), (1, 6, 7, 9)))
    expected = np.maximum(reference.compute(Problem.conv2d(x.shape, w.shape, padding=1), x=x,
                                            w=w, y=None) + bias[:, None, None] + z, 0)
    packs = handle.weights_cache.packs
    for _ in range(2):
        y = convsolve.conv2d(x, w, padding=1, bias=bias, z=z, activation="relu", solver=name,
                             handle=handle, constant_weights=True)
        assert reference.relative_error(y, expected) < F2x3().tolerance
    assert handle.weights_cache.packs == packs + 1
