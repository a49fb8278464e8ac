"""Conv2d and ConvTranspose2d modules computed by convsolve, and replace_convs: a model's
torch.nn convolutions swapped for them in place."""
import torch
from torch import nn

from ..errors import ValidationError
from . import functions


class _Convolution:
    """What convsolve's Conv1d and Conv2d share: refused when made if convsolve cannot serve
    them, an optional fused ``activation`` (functions.activation_of lists them), the forward."""

    def __init__(self, *args, activation=None, **kwargs):
        super().__init__(*args, **kwargs)
        check_module(self, type(self).__name__)
        self.activation = activation

    def forward(self, input):
        padding = self.padding if isinstance(self.padding, str) else tuple(self.padding)
        return self.function(input, self.weight, self.bias, self.stride, padding, self.dilation,
                             self.groups, getattr(self, "activation", None))


class _Transposed:
    """What convsolve's ConvTranspose1d and ConvTranspose2d share: the check when made, and
    the forward (``output_size`` as torch.nn's)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        check_module(self, type(self).__name__)

    def forward(self, input, output_size=None):
        output_padding = self._output_padding(input, output_size, self.stride, self.padding,
                                              self.kernel_size, len(self.stride), self.dilation)
        return self.function(input, self.weight, self.bias, self.stride, self.padding,
                             output_padding, self.groups, self.dilation)


class Conv2d(_Convolution, nn.Conv2d):
    """torch.nn.Conv2d computed by convsolve (forward, and backward for input, weight and
    bias), with an optional fused ``activation``; its parameters and state dict are
    torch.nn.Conv2d's.  CPU float32 tensors, padding_mode 'zeros'."""

    function = staticmethod(functions.conv2d)


class Conv1d(_Convolution, nn.Conv1d):
    """torch.nn.Conv1d computed by convsolve (functions.conv1d: rows of a 2-D convolution)."""

    function = staticmethod(functions.conv1d)


class ConvTranspose2d(_Transposed, nn.ConvTranspose2d):
    """torch.nn.ConvTranspose2d computed by convsolve (forward and every gradient); its
    parameters and state dict are torch.nn.ConvTranspose2d's.  CPU float32 tensors."""

    function = staticmethod(functions.conv_transpose2d)


class ConvTranspose1d(_Transposed, nn.ConvTranspose1d):
    """torch.nn.ConvTranspose1d computed by convsolve (functions.conv_transpose1d)."""

    function = staticmethod(functions.conv_transpose1d)


#: The torch.nn convolutions replace_convs swaps, and what for.
REPLACEMENTS = {nn.Conv2d: Conv2d, nn.ConvTranspose2d: ConvTranspose2d, nn.Conv1d: Conv1d,
                nn.ConvTranspose1d: ConvTranspose1d}


def unsupported(module, name):
    """(field, value, why) for what convsolve cannot serve in the convolution ``module``
    (called ``name``): a padding_mode other than 'zeros', parameters not float32 or not on the
    CPU; None when it can serve it."""
    if module.padding_mode != "zeros":
        return f"{name}.padding_mode", module.padding_mode, "convsolve pads with zeros only"
    for kind, tensor in (("weight", module.weight), ("bias", module.bias)):
        if tensor is not None and tensor.device.type != "cpu":
            return f"{name}.{kind}.device", str(tensor.device), functions.CPU_ONLY
        if tensor is not None and tensor.dtype != torch.float32:
            return (f"{name}.{kind}.dtype", str(tensor.dtype),
                    "convsolve computes float32 (convert with .float())")
    return None


def check_module(module, name):
    """Raise unsupported()'s finding for ``module`` as a ValidationError, if any."""
    found = unsupported(module, name)
    if found is not None:
        raise ValidationError(*found)


def replace_convs(model):
    """Swap every torch.nn.Conv2d, ConvTranspose2d, Conv1d and ConvTranspose1d of ``model``
    (itself included) for convsolve's, in place (each module keeps its parameters, buffers and
    hooks: its class changes); returns the names of the modules swapped.  Subclasses of them
    and Conv3d are left as they are.  When some convolution cannot be served
    (unsupported()), nothing is swapped: one ValidationError names the first and counts the
    rest."""
    found = [(name or type(module).__name__, module) for name, module in model.named_modules()
             if type(module) in REPLACEMENTS]
    errors = [error for error in (unsupported(module, name) for name, module in found) if error]
    if errors:
        (field, value, why), more = errors[0], len(errors) - 1
        raise ValidationError(field, value, f"{why}; the model is left unchanged" + (
            f" ({more} more convolutions cannot be served)" if more else ""))
    for _, module in found:
        module.__class__ = REPLACEMENTS[type(module)]
    return [name for name, _ in found]
