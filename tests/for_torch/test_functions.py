"""convsolve.torch's autograd Functions: forward and every gradient equal PyTorch's in float32
for each epilogue (bias, the activations they differentiate) and for transposed convolution;
gradcheck passes in float32 tolerance for every gradient and catches a 1% error; bad tensors
are refused by field."""
import subprocess
import sys

import pytest

pytest.importorskip("torch.nn")
import convsolve.torch as ct
import torch
import torch.nn.functional as F
from convsolve import ValidationError, api
from torch.autograd.gradcheck import GradcheckError

#: (convsolve's activation, PyTorch's function, where its derivative jumps): each activation
#: convsolve.torch differentiates, with default and with other parameters.
ACTIVATIONS = [
    (None, lambda t: t, ()),
    ("relu", F.relu, (0,)),
    (("leaky_relu", 0.1), lambda t: F.leaky_relu(t, 0.1), (0,)),
    ("clipped_relu", F.relu6, (0, 6)),
    (("clipped_relu", 1.0), lambda t: F.hardtanh(t, 0, 1), (0, 1)),
    ("elu", F.elu, (0,)),   # its second derivative jumps there
    (("elu", 0.5), lambda t: F.elu(t, 0.5), (0,)),
    ("logistic", torch.sigmoid, ()),
    ("tanh", torch.tanh, ()),
    (("tanh", 0.5, 2.0), lambda t: 2 * torch.tanh(0.5 * t), ()),
    ("softrelu", F.softplus, ()),
]
GEOMETRY = {"stride": (2, 1), "padding": 1, "dilation": (1, 2), "groups": 2}
TRANSPOSED = {"stride": 2, "padding": 1, "output_padding": (1, 0), "groups": 2,
              "dilation": (1, 2)}
CONV1D = {"stride": 2, "padding": 1, "dilation": 2, "groups": 2}
TRANSPOSED1D = {"stride": 3, "padding": 1, "output_padding": 2}


def _activated(activation, reference):
    """(convsolve's conv2d, PyTorch's, its pre-activation) with ``activation`` on GEOMETRY."""
    return (lambda *t: ct.conv2d(*t, activation=activation, **GEOMETRY),
            lambda *t: reference(F.conv2d(*t, **GEOMETRY)), lambda *t: F.conv2d(*t, **GEOMETRY))


#: {case: (convsolve's function, PyTorch's, the pre-activation (None: no activation), shapes of
#: the tensors they take, small ones for gradcheck, the activation's kinks)}
CASES = {
    **{f"conv2d-{activation}": (*_activated(activation, reference),
                                ((2, 4, 9, 10), (6, 2, 3, 3), (6,)),
                                ((1, 4, 5, 6), (4, 2, 3, 2), (4,)), kinks)
       for activation, reference, kinks in ACTIVATIONS},
    "conv2d-no-bias-same": (lambda x, w: ct.conv2d(x, w, padding="same", dilation=(1, 3)),
                            lambda x, w: F.conv2d(x, w, padding="same", dilation=(1, 3)), None,
                            ((1, 3, 7, 8), (5, 3, 4, 2)), ((1, 2, 4, 5), (2, 2, 2, 2)), ()),
    "conv_transpose2d": (lambda *t: ct.conv_transpose2d(*t, **TRANSPOSED),
                         lambda *t: F.conv_transpose2d(*t, **TRANSPOSED), None,
                         ((2, 4, 5, 6), (4, 3, 3, 3), (6,)), ((1, 2, 3, 3), (2, 2, 3, 2), (4,)),
                         ()),
    "conv1d-relu": (lambda *t: ct.conv1d(*t, activation="relu", **CONV1D),
                    lambda *t: F.relu(F.conv1d(*t, **CONV1D)), lambda *t: F.conv1d(*t, **CONV1D),
                    ((2, 4, 17), (6, 2, 3), (6,)), ((1, 4, 9), (4, 2, 3), (4,)), (0,)),
    "conv1d-same": (lambda x, w: ct.conv1d(x, w, padding="same", groups=2),
                    lambda x, w: F.conv1d(x, w, padding="same", groups=2), None,
                    ((2, 4, 17), (6, 2, 2)), ((1, 2, 7), (2, 1, 2)), ()),
    "conv_transpose1d": (lambda *t: ct.conv_transpose1d(*t, **TRANSPOSED1D),
                         lambda *t: F.conv_transpose1d(*t, **TRANSPOSED1D), None,
                         ((2, 4, 9), (4, 3, 4), (3,)), ((1, 2, 4), (2, 3, 4), (3,)), ()),
}
#: gradcheck in float32: central differences with eps 1e-2 round to ~1e-5 of outputs of order
#: 1-10, and (the activations are smooth away from their kinks) are exact otherwise to
#: ~(3 * eps)^2 * |f'''| / 6; 1e-3 leaves room for the solvers' float32 sums and catches a
#: gradient 1% off (test_gradcheck_catches_a_gradient_one_percent_off).
GRADCHECK = {"eps": 1e-2, "atol": 1e-3, "rtol": 1e-3, "nondet_tol": 0.0}


def _inputs(*shapes, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=generator, requires_grad=True) for shape in shapes]


def _close(got, expected, tolerance=1e-5):
    """Relative error (max-norm) within float32 tolerance."""
    scale = expected.abs().max().clamp_min(1e-30)
    return ((got - expected).abs().max() / scale).item() < tolerance


def _clear_of_kinks(shapes, before, kinks):
    """Inputs of ``shapes`` (the first seed that serves) whose pre-activations ``before``
    stay farther from each of ``kinks`` than a gradcheck perturbation can move them (eps
    times the largest input, weight or 1), twice over: finite differences there are exact."""
    for seed in range(100):
        inputs = _inputs(*shapes, seed=seed)
        if not kinks:
            return inputs
        with torch.no_grad():
            pre = before(*inputs)
            reach = 2 * GRADCHECK["eps"] * max(1.0, *(t.abs().max().item() for t in inputs))
            if all((pre - kink).abs().min().item() > reach for kink in kinks):
                return inputs
    raise AssertionError(f"no seed keeps {shapes} clear of the kinks {kinks}")


@pytest.mark.parametrize("case", CASES)
def test_functions_and_their_gradients_match_pytorch(case):
    """Each function (conv2d with a bias and each activation, without bias and 'same'-padded,
    conv_transpose2d with output padding, groups and dilation, and the 1-D ones) and the
    gradient of each of its inputs equal torch.nn.functional's within float32 tolerance."""
    ours, theirs, _, shapes, _, _ = CASES[case]
    inputs = _inputs(*shapes)
    y, expected = ours(*inputs), theirs(*inputs)
    assert y.shape == expected.shape and _close(y, expected)
    grad = torch.randn_like(expected)
    for got, want in zip(torch.autograd.grad(y, inputs, grad),
                         torch.autograd.grad(expected, inputs, grad)):
        assert _close(got, want)


@pytest.mark.parametrize("case", CASES)
def test_gradcheck_in_float32(case):
    """torch.autograd.gradcheck (finite differences against backward) holds in float32
    tolerance for the input, weight and bias gradients of every case: each activation at
    points clear of its kinks, where its derivative jumps."""
    ours, _, before, _, shapes, kinks = CASES[case]
    inputs = _clear_of_kinks(shapes, before, kinks)
    with pytest.warns(UserWarning, match="double precision"):
        assert torch.autograd.gradcheck(ours, inputs, **GRADCHECK)


@pytest.mark.parametrize("planted", ["conv2d_backward_data", "conv2d_backward_weights",
                                     "conv2d_backward_bias", "tanh"])
def test_gradcheck_catches_a_gradient_one_percent_off(planted, monkeypatch):
    """The same gradcheck fails once one backward direction of convsolve's numpy API, or the
    derivative of an activation (tanh), is 1% too large: its tolerance sees a wrong gradient."""
    if planted == "tanh":
        original = ct.functions._DERIVATIVES["tanh"]
        monkeypatch.setitem(ct.functions._DERIVATIVES, "tanh", lambda *a: original(*a) * 1.01)
    else:
        original = getattr(api, planted)
        monkeypatch.setattr(api, planted, lambda *a, **kw: original(*a, **kw) * 1.01)
    ours, _, _, _, shapes, _ = CASES["conv2d-tanh"]
    with pytest.warns(UserWarning, match="double precision"), \
            pytest.raises(GradcheckError, match="Jacobian mismatch"):
        torch.autograd.gradcheck(ours, _inputs(*shapes), **GRADCHECK)


@pytest.mark.parametrize("wanted", ["input", "weight", "bias"])
def test_each_gradient_alone(wanted):
    """With only one of input, weight and bias requiring a gradient (a frozen layer, a fixed
    input), conv2d and conv_transpose2d compute that one and PyTorch's value for it."""
    for ours, theirs in ((ct.conv2d, F.conv2d), (ct.conv_transpose2d, F.conv_transpose2d)):
        inputs = _inputs((2, 4, 5, 6), (4, 4, 3, 3), (4,))
        for name, tensor in zip(("input", "weight", "bias"), inputs):
            tensor.requires_grad_(name == wanted)
        index = ("input", "weight", "bias").index(wanted)
        (got,) = torch.autograd.grad(ours(*inputs, padding=1).sum(), inputs[index])
        (want,) = torch.autograd.grad(theirs(*inputs, padding=1).sum(), inputs[index])
        assert _close(got, want)


def test_bad_tensors_are_refused_by_field(on_gpu):
    """A tensor on a GPU (a FakeTensor on cuda:0) or the meta device, or not float32, and an
    activation whose derivative its output does not give, are refused with ValidationErrors
    naming the tensor's field and value, before anything is computed."""
    x, w = _inputs((1, 2, 5, 5), (3, 2, 3, 3))
    xt, wt = _inputs((1, 3, 4, 4), (3, 2, 3, 3))
    cases = [(lambda: ct.conv2d(on_gpu(x.shape), w), "input.device", "cuda:0"),
             (lambda: ct.conv2d(x, on_gpu(w.shape)), "weight.device", "cuda:0"),
             (lambda: ct.conv2d(x, w, on_gpu((3,))), "bias.device", "cuda:0"),
             (lambda: ct.conv_transpose2d(on_gpu(xt.shape), wt), "input.device", "cuda:0"),
             (lambda: ct.conv1d(on_gpu((1, 2, 5)), w[:, :, 0]), "input.device", "cuda:0"),
             (lambda: ct.conv2d(x.to("meta"), w), "input.device", "meta"),
             (lambda: ct.conv2d(x, w.double()), "weight.dtype", "torch.float64"),
             (lambda: ct.conv2d(x, w, torch.zeros(3, dtype=torch.float16)), "bias.dtype",
              "torch.float16"),
             (lambda: ct.conv_transpose2d(xt.to(torch.bfloat16), wt), "input.dtype",
              "torch.bfloat16"),
             (lambda: ct.conv2d(x, w, activation="abs"), "activation", "abs"),
             (lambda: ct.conv2d(x, w, activation=("leaky_relu", 0.0)), "activation",
              ("leaky_relu", 0.0)),
             (lambda: ct.conv_transpose1d(x[:, :, 0], [1.0]), "weight", "list")]
    for call, field, value in cases:
        with pytest.raises(ValidationError) as info:
            call()
        assert (info.value.field, info.value.value) == (field, value)
        if value == "cuda:0":
            assert "CUDA and OpenCL cannot share" in str(info.value)


def test_non_contiguous_tensors_are_served():
    """A channels_last input, a sliced weight and a transposed gradient (not C-contiguous) are
    made contiguous and give PyTorch's output and gradients."""
    x, w, b = _inputs((2, 4, 6, 7), (3, 8, 3, 3), (3,))
    x_last = x.detach().to(memory_format=torch.channels_last).requires_grad_()
    w_slice = w[:, ::2]
    y = ct.conv2d(x_last, w_slice, b, padding=1)
    expected = F.conv2d(x_last, w_slice, b, padding=1)
    assert not x_last.is_contiguous() and not w_slice.is_contiguous()
    assert _close(y, expected)
    grad = torch.randn(2, 3, 7, 6).transpose(2, 3)
    for got, want in zip(torch.autograd.grad(y, (x_last, w, b), grad),
                         torch.autograd.grad(expected, (x_last, w, b), grad)):
        assert _close(got, want)


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
