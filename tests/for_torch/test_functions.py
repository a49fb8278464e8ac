"""convsolve.torch's autograd Functions: forward and every gradient equal PyTorch's in float32
for each epilogue (bias, the activations they differentiate) and for transposed convolution;
gradcheck passes in float32 tolerance; bad tensors are refused by field."""
import subprocess
import sys

import pytest

pytest.importorskip("torch.nn")
import convsolve.torch as ct
import torch
import torch.nn.functional as F
from convsolve import ValidationError

#: (convsolve's activation, PyTorch's function)
ACTIVATIONS = [
    (None, lambda t: t),
    ("relu", F.relu),
    (("leaky_relu", 0.1), lambda t: F.leaky_relu(t, 0.1)),
    ("clipped_relu", F.relu6),
    ("elu", F.elu),
    ("logistic", torch.sigmoid),
    ("tanh", torch.tanh),
    ("softrelu", F.softplus),
]
GEOMETRY = {"stride": (2, 1), "padding": 1, "dilation": (1, 2), "groups": 2}


def _inputs(*shapes, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=generator, requires_grad=True) for shape in shapes]


def _close(got, expected, tolerance=1e-5):
    """Relative error (max-norm) within float32 tolerance."""
    scale = expected.abs().max().clamp_min(1e-30)
    return ((got - expected).abs().max() / scale).item() < tolerance


@pytest.mark.parametrize("activation,reference", ACTIVATIONS,
                         ids=[str(a) for a, _ in ACTIVATIONS])
def test_conv2d_and_its_gradients_match_pytorch(activation, reference):
    """conv2d with a bias and each activation, and the gradients of input, weight and bias,
    equal torch.nn.functional's within float32 tolerance (strided, dilated, grouped)."""
    x, w, b = _inputs((2, 4, 9, 10), (6, 2, 3, 3), (6,))
    y = ct.conv2d(x, w, b, activation=activation, **GEOMETRY)
    expected = reference(F.conv2d(x, w, b, **GEOMETRY))
    assert y.shape == expected.shape and _close(y, expected)
    grad = torch.randn_like(expected)
    for got, want in zip(torch.autograd.grad(y, (x, w, b), grad),
                         torch.autograd.grad(expected, (x, w, b), grad)):
        assert _close(got, want)


def test_conv2d_without_bias_and_with_same_padding():
    """No bias gives no bias gradient; padding='same' with an even kernel pads as PyTorch does
    (the odd row and column at the bottom and right)."""
    x, w = _inputs((1, 3, 7, 8), (5, 3, 4, 2))
    y = ct.conv2d(x, w, padding="same", dilation=(1, 3))
    expected = F.conv2d(x, w, padding="same", dilation=(1, 3))
    assert y.shape == expected.shape and _close(y, expected)
    (dx,) = torch.autograd.grad(y.sum(), (x,))
    assert _close(dx, torch.autograd.grad(expected.sum(), (x,))[0])


def test_conv_transpose2d_and_its_gradients_match_pytorch():
    """conv_transpose2d (output padding, groups, bias) and its three gradients equal PyTorch's."""
    x, w, b = _inputs((2, 4, 5, 6), (4, 3, 3, 3), (6,))
    kw = {"stride": 2, "padding": 1, "output_padding": (1, 0), "groups": 2}
    y = ct.conv_transpose2d(x, w, b, **kw)
    expected = F.conv_transpose2d(x, w, b, **kw)
    assert y.shape == expected.shape and _close(y, expected)
    grad = torch.randn_like(expected)
    for got, want in zip(torch.autograd.grad(y, (x, w, b), grad),
                         torch.autograd.grad(expected, (x, w, b), grad)):
        assert _close(got, want)


def test_1d_convolutions_and_their_gradients_match_pytorch():
    """conv1d (strided, dilated, grouped, 'same' too, with an activation) and conv_transpose1d
    (output padding), rows of the 2-D ones, equal PyTorch's with every gradient."""
    x, w, b = _inputs((2, 4, 17), (6, 2, 3), (6,))
    xt, wt, bt = _inputs((2, 4, 9), (4, 3, 4), (3,), seed=1)
    pairs = [(ct.conv1d(x, w, b, stride=2, padding=1, dilation=2, groups=2, activation="relu"),
              torch.relu(F.conv1d(x, w, b, stride=2, padding=1, dilation=2, groups=2)), (x, w, b)),
             (ct.conv1d(x, w[:, :, :2].contiguous(), padding="same", groups=2),
              F.conv1d(x, w[:, :, :2], padding="same", groups=2), (x, w)),
             (ct.conv_transpose1d(xt, wt, bt, stride=3, padding=1, output_padding=2),
              F.conv_transpose1d(xt, wt, bt, stride=3, padding=1, output_padding=2),
              (xt, wt, bt))]
    for y, expected, inputs in pairs:
        assert y.shape == expected.shape and _close(y, expected)
        grad = torch.randn_like(expected)
        for got, want in zip(torch.autograd.grad(y, inputs, grad),
                             torch.autograd.grad(expected, inputs, grad)):
            assert _close(got, want)


@pytest.mark.parametrize("activation", [None, "tanh", "softrelu"])
def test_gradcheck_in_float32(activation):
    """torch.autograd.gradcheck (finite differences against backward) holds in float32
    tolerance for the input, weight and bias of conv2d with smooth activations (relu's kink
    defeats finite differences: the comparison with PyTorch checks it), and of
    conv_transpose2d."""
    x, w, b = _inputs((1, 2, 5, 4), (3, 2, 3, 2), (3,), seed=3)
    check = {"eps": 1e-2, "atol": 2e-2, "rtol": 2e-2, "nondet_tol": 1e-6}
    with pytest.warns(UserWarning, match="double precision"):
        assert torch.autograd.gradcheck(
            lambda *t: ct.conv2d(*t, padding=1, activation=activation), (x, w, b), **check)
    if activation is None:
        xt, wt, bt = _inputs((1, 3, 3, 4), (3, 2, 2, 3), (2,), seed=4)
        with pytest.warns(UserWarning, match="double precision"):
            assert torch.autograd.gradcheck(
                lambda *t: ct.conv_transpose2d(*t, stride=2, padding=1), (xt, wt, bt), **check)


def test_bad_tensors_are_refused_by_field():
    """A tensor not on the CPU (here the meta device) or not float32, and an activation whose
    derivative its output does not give, are refused with ValidationErrors naming them."""
    x, w = _inputs((1, 2, 5, 5), (3, 2, 3, 3))
    cases = [(lambda: ct.conv2d(x.to("meta"), w), "input.device"),
             (lambda: ct.conv2d(x, w.double()), "weight.dtype"),
             (lambda: ct.conv2d(x, w, torch.zeros(3, dtype=torch.float16)), "bias.dtype"),
             (lambda: ct.conv2d(x, w, activation="abs"), "activation"),
             (lambda: ct.conv2d(x, w, activation=("leaky_relu", 0.0)), "activation"),
             (lambda: ct.conv1d(x[:, :, 0].to("meta"), w[:, :, 0]), "input.device"),
             (lambda: ct.conv_transpose1d(x[:, :, 0], [1.0]), "weight")]
    for call, field in cases:
        with pytest.raises(ValidationError) as info:
            call()
        assert info.value.field == field


def test_gradients_of_gradients_are_refused():
    """The backward passes are once differentiable: a second derivative is a clear error, not a
    wrong answer."""
    x, w = _inputs((1, 2, 4, 4), (2, 2, 3, 3))
    (dx,) = torch.autograd.grad(ct.conv2d(x, w, padding=1).square().sum(), (x,),
                                create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable"):
        dx.sum().backward()


def test_the_core_never_imports_torch():
    """import convsolve and a numpy call leave torch unimported (convsolve.torch is opt-in)."""
    code = ("import sys, numpy as np, convsolve\n"
            "convsolve.conv2d(np.ones((1, 1, 3, 3), np.float32), np.ones((1, 1, 1, 1), np.float32))\n"
            "assert 'torch' not in sys.modules, 'the core imported torch'\n")
    subprocess.run([sys.executable, "-c", code], check=True)
