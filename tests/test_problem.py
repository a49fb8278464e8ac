"""Problem model: shapes, keys, defines, and every validation error naming its field."""
import pickle

import numpy as np
import pytest
from convsolve import Direction, Problem, TensorDesc, ValidationError


def test_output_shape_with_stride_padding_dilation():
    """Output size is (in + pads - dilated filter) // stride + 1 per axis."""
    p = Problem.conv2d((2, 4, 9, 11), (6, 2, 3, 2), stride=(2, 3),
                       padding=((1, 0), (2, 1)), dilation=(2, 1), groups=2)
    assert p.y.shape == (2, 6, (9 + 1 - 5) // 2 + 1, (11 + 3 - 2) // 3 + 1)
    assert p.flops == 2 * 2 * 6 * p.out_h * p.out_w * 2 * 3 * 2


@pytest.mark.parametrize("padding, pads", [
    (1, ((1, 1), (1, 1))), ((1, 2), ((1, 1), (2, 2))), (((0, 1), (2, 3)), ((0, 1), (2, 3)))])
def test_padding_forms(padding, pads):
    """Padding is an int, a (pad_h, pad_w) pair or ((top, bottom), (left, right))."""
    assert Problem.conv2d((1, 1, 5, 5), (1, 1, 3, 3), padding=padding).conv.pads == pads


def test_key_round_trips_and_is_readable():
    """key() names every field and from_key() rebuilds the same problem."""
    p = Problem.conv2d((8, 64, 56, 56), (64, 64, 3, 3), padding=((1, 0), (1, 2)),
                       direction="backward-data")
    assert p.key() == "bwd-n8-c64-h56-w56-k64-y3-x3-p1.0-q1.2-u1-v1-l1-j1-g1-float32-NCHW"
    assert Problem.from_key(p.key()) == p
    with pytest.raises(ValidationError, match="problem key"):
        Problem.from_key("nonsense")


def test_defines_and_kernel_args_agree():
    """defines() and kernel_args() describe the same sizes."""
    p = Problem.conv2d((2, 4, 7, 9), (6, 2, 3, 2), stride=2, padding=((1, 0), (2, 1)), groups=2)
    d = p.defines()
    assert [int(a) for a in p.kernel_args()] == [
        d["CS_N"], d["CS_C"], d["CS_H"], d["CS_W"], d["CS_K"], d["CS_R"], d["CS_S"], d["CS_OH"],
        d["CS_OW"], d["CS_GROUPS"], d["CS_PAD_T"], d["CS_PAD_L"], d["CS_STRIDE_H"],
        d["CS_STRIDE_W"], d["CS_DIL_H"], d["CS_DIL_W"]]


def test_direction_parse_and_with_direction():
    """Directions parse from names and values; with_direction keeps the convolution."""
    assert Direction.parse("backward_weights") is Direction.BACKWARD_WEIGHTS
    assert Direction.parse("fwd") is Direction.FORWARD
    p = Problem.conv2d((1, 2, 5, 5), (3, 2, 3, 3))
    assert p.with_direction("wrw").y == p.y


def test_zero_batch_is_valid():
    """A zero batch is a valid problem with empty x and y."""
    p = Problem.conv2d((0, 3, 8, 8), (4, 3, 3, 3))
    assert p.y.shape == (0, 4, 6, 6) and p.x.nbytes == 0 and p.flops == 0


@pytest.mark.parametrize("kwargs, field", [
    ({"x_shape": (1, 6, 8, 8), "w_shape": (4, 3, 3, 3), "groups": 4}, "groups"),       # c % g
    ({"x_shape": (1, 6, 8, 8), "w_shape": (5, 2, 3, 3), "groups": 3}, "groups"),       # k % g
    ({"x_shape": (1, 6, 8, 8), "w_shape": (4, 5, 3, 3)}, "w_shape[1] (C)"),         # channels
    ({"x_shape": (1, 0, 8, 8), "w_shape": (4, 0, 3, 3)}, "x_shape[1] (C)"),         # empty tensor
    ({"x_shape": (1, 3, 8, 8), "w_shape": (0, 3, 3, 3)}, "w_shape[0] (N)"),         # no filters
    ({"x_shape": (-1, 3, 8, 8), "w_shape": (4, 3, 3, 3)}, "x_shape[0] (N)"),        # negative
    ({"x_shape": (1, 3, 8), "w_shape": (4, 3, 3, 3)}, "x_shape"),                   # rank
    ({"x_shape": (1, 3, 8, 8), "w_shape": (4, 3, 3, 3), "stride": 0}, "stride"),
    ({"x_shape": (1, 3, 8, 8), "w_shape": (4, 3, 3, 3), "dilation": (1, 0)}, "dilation"),
    ({"x_shape": (1, 3, 8, 8), "w_shape": (4, 3, 3, 3), "padding": -1}, "padding"),
    ({"x_shape": (1, 3, 8, 8), "w_shape": (4, 3, 3, 3), "padding": ((1, -1), (0, 0))}, "padding"),
    ({"x_shape": (1, 3, 2, 8), "w_shape": (4, 3, 3, 3)}, "output height"),
    ({"x_shape": (1, 3, 8, 4), "w_shape": (4, 3, 3, 3), "dilation": 2}, "output width"),
    ({"x_shape": (1, 3, 8, 8), "w_shape": (4, 3, 3, 3), "stride": 1.5}, "stride"),
    ({"x_shape": (1, 3, 8, 8), "w_shape": (4, 3, 3, 3), "dtype": "float64"}, "x_shape.dtype"),
    ({"x_shape": (1, 3, 8, 8), "w_shape": (4, 3, 3, 3), "direction": "sideways"}, "direction"),
    ({"x_shape": (1, 3, 8, 8), "w_shape": (4, 3, 3, 3), "groups": True}, "groups"),
])
def test_invalid_problems_name_field_and_value(kwargs, field):
    """Each invalid input raises a ValidationError (a ValueError) naming the field."""
    x_shape, w_shape = kwargs.pop("x_shape"), kwargs.pop("w_shape")
    with pytest.raises(ValidationError) as info:
        Problem.conv2d(x_shape, w_shape, **kwargs)
    assert isinstance(info.value, ValueError)
    assert info.value.field == field
    assert f"invalid {field}=" in str(info.value)


def test_numpy_integers_are_accepted():
    """Sizes may be numpy integers (shapes often come from arrays)."""
    p = Problem.conv2d(tuple(np.int64(v) for v in (1, 3, 8, 8)), (4, 3, 3, 3), stride=np.int32(2))
    assert p.y.shape == (1, 4, 3, 3)


@pytest.mark.parametrize("kwargs, field", [
    ({"stride": 2 ** 31}, "stride"),                                   # the tester's std::bad_cast
    ({"stride": (1, np.int64(2 ** 40))}, "stride"),
    ({"padding": 2 ** 31}, "padding"),
    ({"padding": ((0, 2 ** 31), (0, 0))}, "padding"),
    ({"dilation": (2 ** 31, 1)}, "dilation"),
    ({"x_shape": (1, 1, 2 ** 31, 1)}, "x_shape[2] (H)"),
    ({"x_shape": (2 ** 31, 1, 1, 1)}, "x_shape[0] (N)"),
    ({"w_shape": (2 ** 31, 1, 1, 1)}, "w_shape[0] (N)"),
    ({"x_shape": (2 ** 16, 2 ** 15, 1, 1), "w_shape": (1, 2 ** 15, 1, 1)}, "x_shape"),   # 2**31
    ({"w_shape": (2 ** 16, 1, 2 ** 15, 1), "padding": (2 ** 15, 0)}, "w_shape"),
    ({"padding": ((2 ** 16, 0), (2 ** 15, 0))}, "y_shape (output)"),    # 65537 * 32769 > 2**31
    ({"x_shape": (1, 1, 2 ** 31 - 1, 1), "padding": (1, 0)}, "padded height"),
    ({"padding": ((2 ** 30, 2 ** 30), (0, 0)), "stride": 2 ** 30}, "padded height"),
    ({"x_shape": (1, 1, 1, 2 ** 31 - 2), "padding": ((0, 0), (1, 1)), "stride": 9}, "padded width"),
])
def test_sizes_kernels_cannot_take_are_refused(kwargs, field):
    """Every size, pad, stride and dilation, each tensor's element count and each padded input
    extent must fit a 32-bit int (kernels take them as int arguments and index with them)."""
    kwargs = {"x_shape": (1, 1, 1, 1), "w_shape": (1, 1, 1, 1), **kwargs}
    with pytest.raises(ValidationError) as info:
        Problem.conv2d(kwargs.pop("x_shape"), kwargs.pop("w_shape"), **kwargs)
    assert info.value.field == field


def test_sizes_at_the_int32_limit_are_valid():
    """The largest admitted sizes still make a problem whose kernel arguments fit int32."""
    big = 2 ** 31 - 1
    cases = [Problem.conv2d((1, 1, big, 1), (1, 1, 1, 1)),
             Problem.conv2d((1, 1, 1, 1), (1, 1, 1, 1), stride=big, dilation=big,
                            padding=((big - 1, 0), (0, big - 1))),
             Problem.conv2d((1, 1, 1, 1), (1, 1, 2, 1), dilation=(big - 1, 1),
                            padding=((big - 1, 0), (0, 0)))]
    for problem in cases:
        assert max(int(a) for a in problem.kernel_args()) <= big
    assert cases[1].y.shape == (1, 1, 1, 1) and cases[2].y.shape == (1, 1, 1, 1)


@pytest.mark.parametrize("dtype, layout, field", [
    (["float32"], "NCHW", "t.dtype"), ({}, "NCHW", "t.dtype"), ("float32", ["NCHW"], "t.layout"),
    ("float32", None, "t.layout")])
def test_unhashable_dtype_or_layout_is_a_validation_error(dtype, layout, field):
    """A dtype or layout that is not a supported name (even an unhashable one) names its field."""
    with pytest.raises(ValidationError) as info:
        TensorDesc.make("t", (1, 1, 1, 1), dtype, layout)
    assert info.value.field == field


def test_a_pickled_problem_leaves_its_cached_hash_and_key_behind():
    """Pickling keeps the fields only: a string's hash differs between processes."""
    problem = Problem.conv2d((1, 2, 5, 5), (3, 2, 3, 3), padding=1)
    hash(problem), problem.key()
    copy = pickle.loads(pickle.dumps(problem))
    assert "_hash" not in copy.__dict__ and "_key" not in copy.__dict__
    assert copy == problem and hash(copy) == hash(problem) and copy.key() == problem.key()
