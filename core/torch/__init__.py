"""convsolve.torch: PyTorch's 2-D and 1-D convolutions computed by convsolve on CPU tensors (the
optional extra convsolve[torch]; the rest of convsolve never imports torch).

``conv2d``, ``conv_transpose2d``, ``conv1d`` and ``conv_transpose1d`` (rows of the 2-D ones)
are differentiable functions, ``Conv2d``, ``ConvTranspose2d``, ``Conv1d`` and
``ConvTranspose1d`` modules with torch.nn's parameters and state dicts, and ``replace_convs``
swaps a model's convolutions for them in place.  Every call goes through the numpy API on the
default handle, which keeps one plan per problem: find runs once per shape and direction, as
cuDNN's benchmark mode does.  docs/pytorch.md has what maps to what.
"""
from .functions import (
    activation_of,
    conv1d,
    conv2d,
    conv_transpose1d,
    conv_transpose2d,
)
from .modules import Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d, replace_convs

__all__ = ["Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d", "activation_of", "conv1d",
           "conv2d", "conv_transpose1d", "conv_transpose2d", "replace_convs"]
