"""The reference: compute_at gives compute()'s values, non-finite ones included, at any index;
every spatial rank and layout equals a brute-force loop and the 2-D reference."""
import itertools

import numpy as np
import pytest
from convsolve import LAYOUTS, Direction, Problem, reference
from convsolve.testing import random_tensors, standard_problems


@pytest.mark.parametrize("problem", standard_problems(), ids=lambda p: p.key())
def test_elements_equal_the_whole_reference(problem):
    """Every element computed on its own equals the whole-tensor reference, with an inf and a
    NaN planted in the inputs too."""
    host = random_tensors(problem, 1)
    index = np.arange(getattr(problem, problem.direction.output).size)
    for planted in (False, True):
        if planted:
            host["w"].flat[0], host["x"].flat[0], host["y"].flat[-1] = np.inf, np.inf, np.nan
        with np.errstate(invalid="ignore"):
            whole = reference.compute(problem, **host).ravel()
            elements = reference.compute_at(problem, host["x"], host["w"], host["y"], index)
        assert np.array_equal(np.isnan(elements), np.isnan(whole))
        assert np.array_equal(np.isinf(elements), np.isinf(whole))
        finite = np.isfinite(whole)
        assert np.allclose(elements[finite], whole[finite], rtol=1e-12, atol=1e-12)


def brute_force(problem, x, w, y):
    """The output of ``problem`` by plain loops over every product (logical order, float64)."""
    conv, g = problem.conv, problem.groups
    cpg, kpg = problem.c // g, problem.k // g
    out = np.zeros(getattr(problem, problem.direction.output).shape)
    for n, k, *o in itertools.product(range(problem.n), range(problem.k),
                                      *map(range, problem.out_sizes)):
        for c, *t in itertools.product(range(cpg), *map(range, problem.fil_sizes)):
            i = [oo * u - lo + tt * d for oo, u, (lo, _), tt, d in zip(
                o, conv.strides, conv.pads, t, conv.dilations)]
            if not all(0 <= ii < size for ii, size in zip(i, problem.in_sizes)):
                continue
            xi, wi, yi = (n, (k // kpg) * cpg + c, *i), (k, c, *t), (n, k, *o)
            if problem.direction is Direction.FORWARD:
                out[yi] += x[xi] * w[wi]
            elif problem.direction is Direction.BACKWARD_DATA:
                out[xi] += y[yi] * w[wi]
            else:
                out[wi] += x[xi] * y[yi]
    return out


CASES = [   # x_shape, w_shape, stride, padding, dilation, groups
    ((2, 4, 7), (6, 2, 3), 2, ((1, 2),), 1, 2),
    ((1, 3, 9), (2, 3, 2), 1, 0, 3, 1),
    ((1, 4, 5, 6), (4, 1, 3, 2), (2, 1), ((0, 1), (2, 0)), 1, 4),
    ((2, 2, 4, 5, 3), (3, 2, 2, 3, 1), (1, 2, 1), ((1, 0), (0, 1), (1, 1)), (2, 1, 1), 1),
    ((1, 6, 3, 4, 4), (4, 3, 1, 2, 3), 1, 1, (1, 2, 1), 2),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: f"{len(case[0]) - 2}d")
@pytest.mark.parametrize("direction", list(Direction))
@pytest.mark.parametrize("channels_last", [False, True])
def test_reference_equals_brute_force_in_every_layout(case, direction, channels_last):
    """compute() equals a loop over every product, for 1-D and 3-D problems, with groups,
    dilation, strides and asymmetric pads, in channels-first and channels-last layouts (and x
    and y in different ones); compute_at equals compute at every element."""
    rank = len(case[0]) - 2
    first, last = LAYOUTS[rank]
    layout = {"x": last, "w": first, "y": last} if channels_last else None
    problem = Problem.convolution(*case, direction=direction, layout=layout)
    host = random_tensors(problem, 3)
    logical = {name: reference.logical(getattr(problem, name), host[name]) for name in "xwy"}
    out = getattr(problem, direction.output)
    expected = brute_force(problem, *(logical[name] for name in "xwy"))
    result = reference.compute(problem, **host)
    assert result.shape == out.memory_shape
    assert np.allclose(reference.logical(out, result), expected, rtol=1e-12, atol=1e-12)
    index = np.arange(out.size)
    at = reference.compute_at(problem, host["x"], host["w"], host["y"], index)
    assert np.allclose(at, result.ravel(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("direction", list(Direction))
def test_ranks_agree_through_size_one_dims(direction):
    """A 1-D problem is the 2-D problem of height 1 and the 3-D one of depth and height 1; an
    NHWC problem is the NCHW one with its arrays transposed."""
    kwargs = {"stride": 2, "dilation": 2, "groups": 2, "direction": direction}
    one = Problem.conv1d((2, 4, 11), (6, 2, 3), padding=((1, 2),), **kwargs)
    two = Problem.conv2d((2, 4, 1, 11), (6, 2, 1, 3), padding=((0, 0), (1, 2)),
                         **{**kwargs, "stride": (1, 2), "dilation": (1, 2)})
    three = Problem.conv3d((2, 4, 1, 1, 11), (6, 2, 1, 1, 3), padding=((0, 0), (0, 0), (1, 2)),
                           **{**kwargs, "stride": (1, 1, 2), "dilation": (1, 1, 2)})
    nhwc = Problem.conv2d(two.x.shape, two.w.shape, (1, 2), ((0, 0), (1, 2)), (1, 2), 2,
                          direction, layout="NHWC")
    host = random_tensors(one, 5)
    result = reference.compute(one, **host)
    assert np.allclose(reference.compute(two, **{n: a.reshape(getattr(two, n).shape)
                                                 for n, a in host.items()}).ravel(), result.ravel())
    assert np.allclose(reference.compute(three, **{n: a.reshape(getattr(three, n).shape)
                                                   for n, a in host.items()}).ravel(),
                       result.ravel())
    arrays = {n: reference.in_memory(getattr(nhwc, n), a.reshape(getattr(two, n).shape))
              for n, a in host.items()}
    out = getattr(nhwc, direction.output)
    assert np.allclose(reference.logical(out, reference.compute(nhwc, **arrays)).ravel(),
                       result.ravel())
