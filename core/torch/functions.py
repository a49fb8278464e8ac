"""Autograd Functions: PyTorch's conv2d and conv_transpose2d (bias, activation) computed by
convsolve in every direction, on CPU float32 tensors shared with numpy (no copy)."""
import torch
from torch.autograd.function import once_differentiable

from .. import api
from ..epilogue import Activation
from ..errors import ValidationError

#: An activation's derivative from its output y and parameters (a, b): the modes whose output
#: determines it (abs and power do not, so they are refused for autograd).
_DERIVATIVES = {
    "identity": None,
    "relu": lambda y, a, b: (y > 0).to(y.dtype),
    "leaky_relu": lambda y, a, b: torch.where(y > 0, 1.0, a).to(y.dtype),
    "clipped_relu": lambda y, a, b: ((y > 0) & (y < a)).to(y.dtype),
    "elu": lambda y, a, b: torch.where(y > 0, 1.0, y + a),
    "logistic": lambda y, a, b: y * (1 - y),
    "tanh": lambda y, a, b: a * b * (1 - (y / b) ** 2),
    "softrelu": lambda y, a, b: -torch.expm1(-y),
}


#: Why a GPU tensor is refused.
CPU_ONLY = ("convsolve.torch runs on CPU tensors: CUDA and OpenCL cannot share a GPU tensor's "
            "memory (keep the model on the CPU, or use torch's own convolutions there)")


def activation_of(activation):
    """``activation`` (a name, (name, a[, b, g]), a convsolve.Activation or None) as an
    Activation whose derivative its output gives, else a ValidationError."""
    parsed = Activation.parse(activation)
    if parsed.mode not in _DERIVATIVES or (parsed.mode in ("leaky_relu", "elu") and parsed.a <= 0) \
            or (parsed.mode == "tanh" and parsed.b == 0):
        raise ValidationError("activation", activation, "convsolve.torch differentiates "
                              f"{', '.join(_DERIVATIVES)} (leaky_relu and elu with a > 0, tanh "
                              "with b != 0): their output gives their derivative")
    return parsed


def checked(name, tensor):
    """``tensor``, a float32 CPU torch.Tensor; a GPU tensor, another dtype or no tensor is a
    ValidationError naming ``name``."""
    if not isinstance(tensor, torch.Tensor):
        raise ValidationError(name, type(tensor).__name__, "expected a torch.Tensor")
    if tensor.device.type != "cpu":
        raise ValidationError(f"{name}.device", str(tensor.device), CPU_ONLY)
    if tensor.dtype != torch.float32:
        raise ValidationError(f"{name}.dtype", str(tensor.dtype), "expected torch.float32 "
                              "(convert with .float())")
    return tensor


def host(name, tensor):
    """The checked ``tensor``'s memory as a C-contiguous float32 numpy array (no copy for a
    contiguous tensor)."""
    return checked(name, tensor).detach().contiguous().numpy()


class Conv2dFunction(torch.autograd.Function):
    """y = act(conv2d(x, w) + bias): forward through convsolve.conv2d's epilogue, backward
    through conv2d_backward_data, _weights and _bias (the activation's derivative from y)."""

    @staticmethod
    def forward(ctx, x, weight, bias, geometry, activation):
        stride, padding, dilation, groups = geometry
        hx, hw = host("input", x), host("weight", weight)
        hb = None if bias is None else host("bias", bias)
        fused = None if activation.mode == "identity" else activation
        y = torch.from_numpy(api.conv2d(hx, hw, stride, padding, dilation, groups, bias=hb,
                                        activation=fused))
        ctx.geometry, ctx.activation = geometry, activation
        ctx.save_for_backward(x, weight, y)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        x, weight, y = ctx.saved_tensors
        derivative = _DERIVATIVES[ctx.activation.mode]
        if derivative is not None:
            grad = grad * derivative(y, ctx.activation.a, ctx.activation.b)
        dy = host("grad_output", grad)
        dx = dw = db = None
        if ctx.needs_input_grad[0]:
            dx = torch.from_numpy(api.conv2d_backward_data(dy, host("weight", weight), tuple(x.shape),
                                                           *ctx.geometry))
        if ctx.needs_input_grad[1]:
            dw = torch.from_numpy(api.conv2d_backward_weights(dy, host("input", x), tuple(weight.shape),
                                                              *ctx.geometry))
        if ctx.needs_input_grad[2]:
            db = torch.from_numpy(api.conv2d_backward_bias(dy))
        return dx, dw, db, None, None


class ConvTranspose2dFunction(torch.autograd.Function):
    """y = conv_transpose2d(x, w) + bias (PyTorch's semantics): forward through
    convsolve.conv_transpose2d, backward through conv2d (dx), conv2d_backward_weights (dw, the
    transposed convolution's x and y swapped) and conv2d_backward_bias."""

    @staticmethod
    def forward(ctx, x, weight, bias, geometry, output_padding):
        stride, padding, dilation, groups = geometry
        hx, hw = host("input", x), host("weight", weight)
        y = torch.from_numpy(api.conv_transpose2d(hx, hw, stride, padding, output_padding,
                                                  groups, dilation))
        if bias is not None:
            y += torch.from_numpy(host("bias", bias)).reshape(1, -1, 1, 1)
        ctx.geometry = geometry
        ctx.save_for_backward(x, weight)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        stride, padding, dilation, groups = ctx.geometry
        dy = host("grad_output", grad)
        dx = dw = db = None
        if ctx.needs_input_grad[0]:
            dx = torch.from_numpy(api.conv2d(dy, host("weight", weight), stride, padding,
                                             dilation, groups))
        if ctx.needs_input_grad[1]:
            dw = torch.from_numpy(api.conv2d_backward_weights(
                host("input", x), dy, tuple(weight.shape), stride, padding, dilation, groups))
        if ctx.needs_input_grad[2]:
            db = torch.from_numpy(api.conv2d_backward_bias(dy))
        return dx, dw, db, None, None


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1,
           activation=None):
    """torch.nn.functional.conv2d through convsolve, differentiable, with a fused
    ``activation`` (convsolve's names: "relu", ("leaky_relu", 0.1), ...; activation_of lists
    those it differentiates).  ``padding`` as convsolve takes it (an int, (pad_h, pad_w) or
    ((top, bottom), (left, right))), or "valid" or "same" as PyTorch's."""
    if padding == "same":   # as PyTorch pads it: the odd row or column at the bottom or right
        dilation = (dilation, dilation) if isinstance(dilation, int) else tuple(dilation)
        reach = [d * (k - 1) for d, k in zip(dilation, weight.shape[2:])]
        padding = tuple((total // 2, total - total // 2) for total in reach)
    geometry = (stride, 0 if padding == "valid" else padding, dilation, groups)
    return Conv2dFunction.apply(input, weight, bias, geometry, activation_of(activation))


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """torch.nn.functional.conv_transpose2d through convsolve, differentiable."""
    return ConvTranspose2dFunction.apply(input, weight, bias, (stride, padding, dilation, groups),
                                         output_padding)


# {{{ 1-D: the 2-D rank on images of height 1

def _row(value, height=1):
    """A 1-D stride, dilation or padding (an int or a 1-tuple) as the 2-D pair of a row:
    ``height`` (1 for a stride or dilation, 0 for a padding), then the value."""
    return (height, value if isinstance(value, int) else value[0])


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1,
           activation=None):
    """torch.nn.functional.conv1d through convsolve: conv2d on images of height 1 (which the
    2-D rank serves exactly), differentiable, with conv2d's fused ``activation``."""
    padding = padding if isinstance(padding, str) else _row(padding, 0)
    rows = [checked(name, t).unsqueeze(2) for name, t in (("input", input), ("weight", weight))]
    return conv2d(*rows, bias, _row(stride), padding, _row(dilation), groups,
                  activation).squeeze(2)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """torch.nn.functional.conv_transpose1d through convsolve: conv_transpose2d on images of
    height 1, differentiable."""
    rows = [checked(name, t).unsqueeze(2) for name, t in (("input", input), ("weight", weight))]
    return conv_transpose2d(*rows, bias, _row(stride), _row(padding, 0),
                            _row(output_padding, 0), groups, _row(dilation)).squeeze(2)

# }}}
