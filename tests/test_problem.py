"""Problem model: shapes, keys, defines, and every validation error naming its field."""
import pickle

import numpy as np
import pytest
from convsolve import Direction, Epilogue, Problem, TensorDesc, ValidationError


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


# {{{ spatial ranks 1 and 3, layouts

def test_1d_and_3d_keys_are_readable_distinct_and_round_trip():
    """1-D keys name the width's letters only, 3-D keys add depth's (d, z, o, t, i), mixed
    layouts are named per tensor, and from_key rebuilds each problem."""
    one = Problem.conv1d((2, 4, 11), (6, 2, 3), stride=2, padding=((1, 2),), groups=2)
    three = Problem.conv3d((1, 4, 5, 6, 7), (6, 4, 3, 2, 1), padding=((1, 0), (0, 1), (2, 2)),
                           stride=(1, 2, 3), dilation=(2, 1, 1), layout="NDHWC")
    mixed = Problem.conv2d((1, 2, 5, 5), (3, 2, 3, 3), layout={"x": "NHWC"})
    assert one.key() == "fwd-n2-c4-w11-k6-x3-q1.2-v2-j1-g2-float32-NCW"
    assert three.key() == ("fwd-n1-c4-d5-h6-w7-k6-z3-y2-x1-o1.0-p0.1-q2.2-t1-u2-v3-i2-l1-j1-g1"
                           "-float32-NDHWC")
    assert mixed.key().endswith("-float32-NHWC.NCHW.NCHW")
    assert mixed.key() != Problem.conv2d((1, 2, 5, 5), (3, 2, 3, 3)).key()
    for problem in (one, three, mixed, three.with_direction("wrw")):
        assert Problem.from_key(problem.key()) == problem


@pytest.mark.parametrize("key", [
    "fwd-n1-c2-h5-w5-k3-y3-x3-p0.0-q0.0-u1-v1-l1-j1-g1-float32-NCW",       # 2-D letters, 1-D layout
    "fwd-n1-c2-d4-h5-w5-k3-y3-x3-p0.0-q0.0-u1-v1-l1-j1-g1-float32-NCDHW",  # no filter depth
    "fwd-n1-c2-h5-w5-k3-y3-x3-p0.0-q0.0-u1-v1-l1-j1-g1-float32-NCHW.NCHW",
])
def test_keys_with_letters_of_another_rank_are_refused(key):
    """A key whose letters do not match its layout's rank is refused, naming the key."""
    with pytest.raises(ValidationError) as info:
        Problem.from_key(key)
    assert info.value.field == "problem key"


def test_layouts_give_memory_order_and_strides():
    """Shapes are logical (N, C, spatial); the layout gives memory_shape and element strides."""
    p = Problem.conv3d((2, 3, 4, 5, 6), (8, 3, 1, 1, 1), layout={"x": "NDHWC", "y": "NDHWC"})
    assert p.x.shape == (2, 3, 4, 5, 6) and p.x.memory_shape == (2, 4, 5, 6, 3)
    assert p.x.strides == (360, 1, 90, 18, 3)
    assert p.w.memory_shape == p.w.shape and p.w.strides == (3, 1, 1, 1, 1)
    assert p.y.layout == "NDHWC" and p.layouts == ("NDHWC", "NCDHW", "NDHWC")
    assert Problem.conv1d((2, 3, 7), (4, 3, 2), layout="NWC").y.memory_shape == (2, 6, 4)


def test_sizes_and_flops_of_every_rank():
    """in_sizes, fil_sizes, out_sizes and flops hold for every rank; the output follows the
    same formula per spatial dim."""
    p = Problem.conv3d((2, 4, 9, 7, 5), (6, 2, 3, 3, 2), stride=(2, 1, 1), padding=1, groups=2)
    assert p.spatial_dims == 3 and p.in_sizes == (9, 7, 5) and p.fil_sizes == (3, 3, 2)
    assert p.out_sizes == ((9 + 2 - 3) // 2 + 1, 7, 6)
    assert p.flops == 2 * 2 * 6 * 5 * 7 * 6 * 2 * 3 * 3 * 2
    assert Problem.conv1d((1, 2, 9), (3, 2, 3), dilation=2).out_sizes == (5,)


@pytest.mark.parametrize("name, words", [
    ("in_h", "input height"), ("in_w", "input width"), ("fil_h", "filter height"),
    ("fil_w", "filter width"), ("out_h", "output height"), ("out_w", "output width")])
def test_2d_sizes_of_other_ranks_raise(name, words):
    """The 2-D accessors raise for 1-D and 3-D problems (a 2-D solver never reads a wrong size);
    kernel_args() and defines() raise for every problem but 2-D NCHW."""
    for problem in (Problem.conv1d((1, 2, 9), (3, 2, 3)),
                    Problem.conv3d((1, 2, 4, 4, 4), (3, 2, 3, 3, 3))):
        with pytest.raises(ValidationError, match=f"{words} is a 2-D problem's"):
            getattr(problem, name)
    nhwc = Problem.conv2d((1, 2, 5, 5), (3, 2, 3, 3), layout="NHWC")
    assert nhwc.in_h == 5
    for call in (nhwc.kernel_args, nhwc.defines):
        with pytest.raises(ValidationError, match="2-D NCHW"):
            call()


@pytest.mark.parametrize("call, field", [
    (lambda: Problem.conv2d((1, 2, 5, 5), (3, 2, 3, 3), layout="NCWH"), "layout"),
    (lambda: Problem.conv2d((1, 2, 5, 5), (3, 2, 3, 3), layout="NDHWC"), "layout"),
    (lambda: Problem.conv3d((1, 2, 5, 5, 5), (3, 2, 3, 3, 3), layout={"w": "NHWC"}),
     "layout['w']"),
    (lambda: Problem.conv2d((1, 2, 5, 5), (3, 2, 3, 3), layout={"z": "NCHW"}), "layout"),
    (lambda: Problem.convolution((1, 2, 5, 5), (3, 2, 3, 3, 3)), "w_shape"),   # mixed ranks
    (lambda: Problem.convolution((1, 2, 5, 5, 5, 5), (3, 2, 3, 3, 3, 3)), "x_shape"),      # rank 4
    (lambda: Problem.conv3d((1, 2, 5, 5), (3, 2, 3, 3)), "x_shape"),
    (lambda: Problem.conv1d((1, 2, 5), (3, 2, 3), padding=(1, 2)), "padding"),
    (lambda: Problem.conv3d((1, 2, 5, 5, 5), (3, 2, 3, 3, 3), stride=(1, 2)), "stride"),
    (lambda: Problem.conv3d((1, 2, 2, 5, 5), (3, 2, 3, 3, 3)), "output depth"),
    (lambda: TensorDesc.make("t", (1, 2, 3), layout="NHWC"), "t"),
])
def test_bad_ranks_and_layouts_name_field_and_value(call, field):
    """An unknown layout, a layout of another rank, a shape that does not match its layout and
    mixed ranks each raise one ValidationError naming the field."""
    with pytest.raises(ValidationError) as info:
        call()
    assert info.value.field == field


def test_epilogues_serve_every_rank_and_layout():
    """An epilogue on a 1-D, 3-D or channels-last problem is taken (issue 31: the bias is per
    output channel in any layout), its key ending in it; a backward one keeps alpha and blend
    only, naming the field."""
    for problem in (Problem.conv1d((1, 2, 9), (3, 2, 3)),
                    Problem.conv3d((1, 2, 3, 4, 5), (3, 2, 1, 1, 1), layout="NDHWC"),
                    Problem.conv2d((1, 2, 5, 5), (3, 2, 3, 3), layout={"y": "NHWC"})):
        assert problem.with_epilogue(Epilogue(bias=True)).key() == problem.key() + "-epi.bias"
        with pytest.raises(ValidationError) as info:
            problem.with_direction("bwd").with_epilogue(Epilogue(bias=True))
        assert info.value.field == "epilogue"


def test_transposed_problems_of_every_rank():
    """conv_transpose maps a 1-D or 3-D transposed convolution onto the convolution it
    transposes, its layouts swapped to match (the input is the Problem's y)."""
    p = Problem.conv_transpose((1, 3, 4, 5, 6), (3, 2, 3, 3, 3), stride=2, padding=1,
                               output_padding=1, layout={"x": "NDHWC"})
    assert p.direction is Direction.BACKWARD_DATA and p.x.shape == (1, 2, 8, 10, 12)
    assert p.y.shape == (1, 3, 4, 5, 6) and p.y.layout == "NDHWC" and p.x.layout == "NCDHW"
    one = Problem.conv_transpose((2, 4, 5), (4, 3, 2), stride=3)
    assert one.x.shape == (2, 3, 14) and one.spatial_dims == 1

# }}}
