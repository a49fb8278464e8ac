"""convsolve.torch's modules and replace_convs: torch.nn state dicts load, a model's
convolutions are swapped in place (or, when one cannot be served, none is and one error names
it), find runs once per shape, and a small CNN trains as in pure PyTorch."""
import copy

import pytest

pytest.importorskip("torch.nn")
import convsolve
import convsolve.torch as ct
import torch
from convsolve import ValidationError
from torch import nn


def _close(got, expected, tolerance=1e-5):
    scale = expected.abs().max().clamp_min(1e-30)
    return ((got - expected).abs().max() / scale).item() < tolerance


def _cnn(seed=0):
    """A small CNN: convolutions (strided, grouped, 'same', transposed), activations, a
    residual add, pooling and a linear head."""
    torch.manual_seed(seed)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, 8, 3, stride=2, padding=1)
            self.grouped = nn.Conv2d(8, 8, 3, padding="same", groups=2, bias=False)
            self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)
            self.head = nn.Linear(4, 5)

        def forward(self, x):
            y = torch.relu(self.stem(x))
            y = torch.relu(self.grouped(y) + y)
            return self.head(self.up(y).mean((2, 3)))
    return Net()


def test_modules_load_torch_state_dicts():
    """Conv2d and ConvTranspose2d take torch.nn's state dicts and compute what those modules
    do (ConvTranspose2d with output_size, as torch's forward takes it)."""
    torch.manual_seed(1)
    x = torch.randn(2, 4, 9, 8)
    conv = nn.Conv2d(4, 6, (3, 2), stride=2, padding=(1, 0), dilation=(2, 1))
    ours = ct.Conv2d(4, 6, (3, 2), stride=2, padding=(1, 0), dilation=(2, 1))
    ours.load_state_dict(conv.state_dict())
    assert _close(ours(x), conv(x))
    up = nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1, groups=1)
    ours_up = ct.ConvTranspose2d(4, 3, 3, stride=2, padding=1)
    ours_up.load_state_dict(up.state_dict())
    assert _close(ours_up(x, output_size=(18, 16)), up(x, output_size=(18, 16)))
    fused = ct.Conv2d(4, 6, 3, padding=1, activation="relu")
    fused.load_state_dict(nn.Conv2d(4, 6, 3, padding=1).state_dict())
    assert _close(fused(x), torch.relu(nn.Conv2d.forward(fused, x)))


def test_replace_convs_swaps_in_place():
    """replace_convs changes the class of every nn.Conv2d and nn.ConvTranspose2d, keeping the
    same parameter objects (an optimizer made before still steps them) and the outputs; it
    returns their names and leaves other modules alone."""
    model = _cnn()
    x = torch.randn(2, 3, 12, 10)
    before, params = model(x), list(model.parameters())
    assert ct.replace_convs(model) == ["stem", "grouped", "up"]
    assert (type(model.stem), type(model.up)) == (ct.Conv2d, ct.ConvTranspose2d)
    assert type(model.head) is nn.Linear
    assert all(a is b for a, b in zip(model.parameters(), params))
    assert _close(model(x), before)
    assert ct.replace_convs(model) == []   # already swapped


def test_replace_convs_serves_1d_convolutions():
    """Conv1d and ConvTranspose1d are swapped too and compute what they did (their state
    dicts load into convsolve's); Conv3d is left alone."""
    torch.manual_seed(4)
    model = nn.Sequential(nn.Conv1d(3, 6, 5, stride=2, padding="valid"),
                          nn.ConvTranspose1d(6, 2, 3, stride=2, output_padding=1),
                          nn.Conv3d(1, 1, 1))
    x = torch.randn(2, 3, 21)
    before = model[1](model[0](x))
    assert ct.replace_convs(model) == ["0", "1"] and type(model[2]) is nn.Conv3d
    assert _close(model[1](model[0](x)), before)
    ours = ct.Conv1d(3, 6, 5, stride=2)
    ours.load_state_dict(model[0].state_dict())
    assert _close(ours(x), nn.functional.conv1d(x, model[0].weight, model[0].bias, stride=2))


def _snapshot(model):
    """What replace_convs may change or break: each module's class, each parameter and buffer
    (the object itself, and a copy of its values where it has any)."""
    tensors = {**dict(model.named_parameters()), **dict(model.named_buffers())}
    return ([(name, type(module)) for name, module in model.named_modules()],
            {name: tensor for name, tensor in tensors.items()},
            {name: tensor.detach().clone() for name, tensor in tensors.items()
             if tensor.device.type == "cpu"})


def _unchanged(model, snapshot):
    """``model`` is as ``snapshot`` saw it: the same classes, tensor objects and values."""
    classes, tensors, values = _snapshot(model)
    return (classes == snapshot[0] and tensors.keys() == snapshot[1].keys()
            and all(tensors[name] is tensor for name, tensor in snapshot[1].items())
            and values.keys() == snapshot[2].keys()
            and all(torch.equal(values[name], value) for name, value in snapshot[2].items()))


@pytest.mark.parametrize("change,field,value", [
    (lambda m, gpu: setattr(m.grouped, "padding_mode", "reflect"), "grouped.padding_mode",
     "reflect"),
    (lambda m, gpu: setattr(m.stem, "padding_mode", "replicate"), "stem.padding_mode",
     "replicate"),
    (lambda m, gpu: m.stem.to(torch.float64), "stem.weight.dtype", "torch.float64"),
    (lambda m, gpu: setattr(m.stem.bias, "data", m.stem.bias.data.half()), "stem.bias.dtype",
     "torch.float16"),
    (lambda m, gpu: setattr(m.up, "weight", gpu(m.up.weight.shape, parameter=True)),
     "up.weight.device", "cuda:0"),
    (lambda m, gpu: setattr(m.up, "bias", gpu(m.up.bias.shape, parameter=True)),
     "up.bias.device", "cuda:0"),
    (lambda m, gpu: m.up.to("meta"), "up.weight.device", "meta"),
], ids=["reflect", "replicate", "float64", "float16-bias", "gpu", "gpu-bias", "meta"])
def test_replace_convs_refuses_what_it_cannot_serve(change, field, value, on_gpu):
    """A padding_mode other than 'zeros', float64 or float16 parameters or parameters off the
    CPU (on a GPU: FakeTensors on cuda:0; on the meta device) give one ValidationError naming
    the module's field and value, and the model is left exactly as it was: every module's
    class, every parameter and buffer object and its values (the convolutions before the bad
    one included)."""
    model = _cnn()
    change(model, on_gpu)
    snapshot = _snapshot(model)
    with pytest.raises(ValidationError, match="left unchanged") as info:
        ct.replace_convs(model)
    assert (info.value.field, info.value.value) == (field, value)
    assert _unchanged(model, snapshot)
    assert {type(m) for m in (model.stem, model.grouped)} == {nn.Conv2d}
    assert type(model.up) is nn.ConvTranspose2d


def test_unchanged_sees_a_change():
    """_unchanged, which the refusals rely on, sees a swapped class, a replaced parameter and
    a changed value."""
    changes = [lambda m: setattr(m.up, "__class__", ct.ConvTranspose2d),
               lambda m: setattr(m.stem, "bias", nn.Parameter(m.stem.bias.detach().clone())),
               lambda m: m.head.weight.data.add_(1)]
    for change in changes:
        model = _cnn()
        snapshot = _snapshot(model)
        assert _unchanged(model, snapshot)
        change(model)
        assert not _unchanged(model, snapshot)


def test_replace_convs_counts_the_other_refusals():
    """With several convolutions it cannot serve, the error names the first and counts the
    rest."""
    model = nn.Sequential(nn.Conv2d(1, 1, 3, padding_mode="circular", padding=1),
                          nn.Conv2d(1, 1, 3, padding_mode="reflect", padding=1))
    with pytest.raises(ValidationError) as info:
        ct.replace_convs(model)
    assert str(info.value) == ("invalid 0.padding_mode='circular': convsolve pads with zeros "
                               "only; the model is left unchanged (1 more convolutions cannot "
                               "be served)")


def test_replace_convs_leaves_a_lazy_convolution_until_it_is_made():
    """A LazyConv2d not yet called is left alone (docs/pytorch.md says so); after its first
    forward pass it is a torch.nn.Conv2d, which replace_convs swaps and which computes what it
    did."""
    torch.manual_seed(5)
    model = nn.Sequential(nn.LazyConv2d(4, 3, padding=1))
    assert ct.replace_convs(model) == [] and type(model[0]) is nn.LazyConv2d
    x = torch.randn(2, 3, 6, 5)
    before = model(x)
    assert ct.replace_convs(model) == ["0"] and type(model[0]) is ct.Conv2d
    assert _close(model(x), before)


def test_modules_refuse_what_they_cannot_serve_when_made():
    """convsolve.torch.Conv2d with padding_mode='reflect' or float64 parameters is refused when
    constructed, naming the field."""
    with pytest.raises(ValidationError, match="Conv2d.padding_mode='reflect'"):
        ct.Conv2d(1, 1, 3, padding_mode="reflect")
    with pytest.raises(ValidationError, match="ConvTranspose2d.weight.dtype='torch.float64'"):
        ct.ConvTranspose2d(1, 1, 3, dtype=torch.float64)


def test_a_swapped_module_refuses_a_gpu_input(on_gpu):
    """A replaced module given a tensor on a GPU (a FakeTensor on cuda:0) or the meta device
    refuses it naming the input's device."""
    model = nn.Conv2d(2, 2, 1)
    ct.replace_convs(model)
    for x, device in ((on_gpu((1, 2, 3, 3)), "cuda:0"),
                      (torch.zeros(1, 2, 3, 3, device="meta"), "meta")):
        with pytest.raises(ValidationError) as info:
            model(x)
        assert (info.value.field, info.value.value) == ("input.device", device)


def test_find_runs_once_per_shape(monkeypatch):
    """Training steps on one shape run find once per convolution problem (each direction of
    each layer), on the first step; a new batch size finds again."""
    calls = []
    original = convsolve.api.find
    monkeypatch.setattr(convsolve.api, "find", lambda handle, problem, **kw: calls.append(
        problem.key()) or original(handle, problem, **kw))
    model = _cnn(seed=2)
    ct.replace_convs(model)

    def step(batch):
        model(torch.randn(batch, 3, 14, 12)).sum().backward()
    step(3)
    first = len(calls)
    assert first and len(set(calls)) == first
    step(3)
    step(3)
    assert len(calls) == first
    step(5)
    assert len(calls) > first


def test_a_small_cnn_trains_as_in_pytorch():
    """The CNN with replaced convolutions, trained 6 SGD steps from the same start on the same
    batches, has PyTorch's loss at every step within float32 noise, and the same weights."""
    torch_model = _cnn(seed=3)
    ours = copy.deepcopy(torch_model)
    ct.replace_convs(ours)
    generator = torch.Generator().manual_seed(0)
    batches = [(torch.randn(4, 3, 16, 12, generator=generator),
                torch.randint(0, 5, (4,), generator=generator)) for _ in range(6)]
    losses = {}
    for name, model in (("torch", torch_model), ("convsolve", ours)):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
        losses[name] = []
        for x, label in batches:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), label)
            loss.backward()
            optimizer.step()
            losses[name].append(loss.item())
    assert losses["torch"][-1] < losses["torch"][0]   # it does train
    for a, b in zip(losses["convsolve"], losses["torch"]):
        assert abs(a - b) <= 1e-5 * abs(b)   # measured: 0 to 8e-8
    for (name, a), b in zip(ours.named_parameters(), torch_model.parameters()):
        assert _close(a.detach(), b.detach(), 1e-4), name
