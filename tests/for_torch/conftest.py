"""convsolve.torch's test set-up: tensors that report a GPU on a machine without one."""
import pytest


@pytest.fixture
def on_gpu():
    """make(shape, parameter=False): an empty float32 tensor (or nn.Parameter) on device
    cuda:0 without CUDA, a torch FakeTensor: it carries a shape, a dtype and a real
    torch.device and no data, which is all of a GPU tensor that convsolve.torch's checks read
    (they look at .device before any data)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    def make(shape, parameter=False):
        with FakeTensorMode():
            tensor = torch.empty(shape, device="cuda")
            return torch.nn.Parameter(tensor) if parameter else tensor
    return make
