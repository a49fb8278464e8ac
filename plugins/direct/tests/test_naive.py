"""direct.Naive*: every direction against the numpy reference on a sweep of awkward shapes."""
import numpy as np
import pytest
from convsolve import Direction, Problem, registry, run
from convsolve.testing import (
    FLOAT32_TOLERANCE,
    check_solver,
    device_buffers,
    expected_output,
    random_tensors,
    read_output,
    relative_error,
)

# (x_shape, w_shape, stride, padding, dilation, groups)
SHAPES = [
    ((1, 1, 1, 1), (1, 1, 1, 1), 1, 0, 1, 1),                    # smallest
    ((2, 3, 7, 5), (4, 3, 3, 3), 1, 1, 1, 1),                    # odd, non-square
    ((1, 5, 9, 11), (3, 5, 3, 2), (2, 3), 0, 1, 1),              # strides, non-square filter
    ((3, 4, 8, 9), (6, 4, 3, 3), 1, ((1, 0), (2, 1)), 1, 1),     # asymmetric padding
    ((1, 2, 10, 9), (2, 2, 3, 3), 1, 2, (2, 3), 1),              # dilation
    ((2, 6, 6, 7), (9, 2, 3, 1), 2, ((0, 2), (1, 0)), 1, 3),     # groups
    ((2, 8, 7, 7), (8, 1, 3, 3), 1, 1, 1, 8),                    # depthwise
    ((1, 4, 5, 5), (4, 4, 5, 5), 1, 0, 1, 1),                    # filter = input
    ((2, 3, 6, 6), (5, 3, 1, 1), 2, 0, 1, 1),                    # strided 1x1
    ((1, 2, 4, 4), (3, 2, 2, 2), 3, 0, 1, 1),                    # stride > filter: gaps
    ((1, 2, 3, 3), (2, 2, 3, 3), 1, ((3, 0), (0, 2)), 1, 1),     # padding past the filter
]
SOLVERS = {Direction.FORWARD: "direct.NaiveFwd", Direction.BACKWARD_DATA: "direct.NaiveBwdData",
           Direction.BACKWARD_WEIGHTS: "direct.NaiveBwdWeights"}


@pytest.mark.parametrize("direction", list(Direction), ids=lambda d: d.value)
@pytest.mark.parametrize("shape", SHAPES, ids=[str(i) for i in range(len(SHAPES))])
def test_matches_reference(handle, shape, direction):
    """The naive kernel of each direction agrees with the float64 reference."""
    x_shape, w_shape, stride, padding, dilation, groups = shape
    problem = Problem.conv2d(x_shape, w_shape, stride, padding, dilation, groups, direction)
    host = random_tensors(problem, seed=len(x_shape) + groups)
    buffers = device_buffers(handle, host)
    run(handle, problem, SOLVERS[direction], **buffers)
    error = relative_error(read_output(handle, problem, buffers), expected_output(problem, host))
    assert error < FLOAT32_TOLERANCE


@pytest.mark.parametrize("name", sorted(SOLVERS.values()))
def test_check_solver(handle, name):
    """Each naive solver honours the whole contract on the standard problem set."""
    assert check_solver(registry().get(name), handle) > 0


@pytest.mark.parametrize("direction", list(Direction), ids=lambda d: d.value)
def test_nd_kernel_equals_naive_cl_bit_for_bit(handle, direction):
    """naive_nd.cl sums in naive.cl's order: on 2-D NCHW problems it gives naive.cl's results
    bit for bit, and on the same problems with every tensor channels-last it gives them
    transposed, bit for bit (so the N-D path generalises the 2-D one exactly)."""
    from convsolve import reference
    from convsolve_direct.naive import nd_args
    from convsolve_direct.plan import KERNELS, enqueue, set_args
    solver = registry().get(SOLVERS[direction])
    for shape in (SHAPES[3], SHAPES[5], SHAPES[6]):   # asymmetric padding, groups, depthwise
        problem = Problem.conv2d(*shape[:6], direction=direction)
        host = random_tensors(problem, seed=3)
        buffers = device_buffers(handle, host)
        run(handle, problem, solver.name, **buffers)
        expected = read_output(handle, problem, buffers)
        kernel = handle.build(KERNELS / "naive_nd.cl",
                              solver.kernel.replace("naive_", "naive_nd_"))
        set_args(kernel, 3, nd_args(problem))
        buffers = device_buffers(handle, host)
        count = getattr(problem, direction.output).size
        enqueue(handle, kernel, ((count + 63) // 64 * 64,), (64,), buffers["x"], buffers["w"],
                buffers["y"]).wait()
        assert np.array_equal(read_output(handle, problem, buffers), expected)
        nhwc = Problem.conv2d(*shape[:6], direction=direction, layout="NHWC")
        moved = {name: reference.in_memory(getattr(nhwc, name), array).astype(np.float32)
                 for name, array in host.items()}
        buffers = device_buffers(handle, moved)
        run(handle, nhwc, solver.name, **buffers)
        out = getattr(nhwc, direction.output)
        assert np.array_equal(reference.logical(out, read_output(handle, nhwc, buffers)),
                              expected)
