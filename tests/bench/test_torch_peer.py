"""Tests of the PyTorch peer: --compare torch with and without torch; what torch cannot take; the
worker's timing, with a fake torch."""
import io
import json
import sys
import time
import types

import pytest
from convsolve import Direction, Problem
from convsolve.bench import hot_loop, torch_peer
from convsolve.errors import ConvsolveError


@pytest.mark.skipif(not torch_peer.available(), reason="torch is not installed")
def test_bench_compare_torch(isolated, capsys, bench_main):
    """--compare torch times torch (on a CPU with and without the malloc thresholds) and gives
    the ratio."""
    assert bench_main(["--suite", "tiny", "--layers", "0", "--directions", "all", "--repeat",
                       "1", "--peak", "100", "--compare", "torch", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    gpu = report["is_gpu"]          # a GPU peer runs once, and compares device times
    assert gpu or "MALLOC_MMAP_THRESHOLD_" in report["torch"]
    for result in report["results"]:
        row = result["rows"][0]
        assert row["torch_ms"] > 0 and (gpu or row["torch_default_ms"] > 0)
        assert row["ratio"] == pytest.approx(row["torch_ms"] / row["time_ms" if gpu else "wall_ms"])
        assert result["total"]["ratio"] is not None


def test_compare_without_torch(isolated, monkeypatch, capsys, bench_main):
    """--compare torch without torch installed still benchmarks, and says why nothing compares."""
    monkeypatch.setattr(torch_peer, "available", lambda: False)
    assert bench_main(["--suite", "tiny", "--layers", "0", "--repeat", "1", "--peak", "100",
                       "--compare", "torch", "--json"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["torch"] == "not compared: torch is not installed"
    assert "no torch comparison" in captured.err
    assert report["results"][0]["rows"][0]["ratio"] is None


def test_torch_args_refuses_asymmetric_padding():
    """Asymmetric padding cannot be given to torch's conv2d: a clear error, not a wrong figure."""
    problem = Problem.conv2d((1, 2, 5, 5), (2, 2, 3, 3), padding=((0, 1), (1, 1)))
    with pytest.raises(ConvsolveError, match="asymmetric"):
        torch_peer.torch_args(problem)


def test_torch_args_and_memory_format_of_every_rank():
    """torch's arguments take one value per spatial dim; channels-last 2-D and 3-D problems are
    compared with torch's channels_last and channels_last_3d formats, 1-D ones with its NCW."""
    fake = types.SimpleNamespace(channels_last="2d", channels_last_3d="3d")
    problem = Problem.convolution((1, 4, 5, 6, 7), (8, 4, 1, 3, 3), (1, 2, 2), (0, 1, 2),
                                  (1, 1, 2), layout="NDHWC")
    assert torch_peer.torch_args(problem) == ((1, 2, 2), (0, 1, 2), (1, 1, 2), 1)
    assert torch_peer.memory_format(fake, problem) == "3d"
    assert torch_peer.memory_format(fake, Problem.conv2d((1, 4, 5, 5), (4, 4, 1, 1),
                                                         layout="NHWC")) == "2d"
    for layout in ("NWC", "NCW"):
        one = Problem.conv1d((1, 4, 9), (4, 2, 3), groups=2, layout=layout)
        assert torch_peer.memory_format(fake, one) is None
        assert torch_peer.memory_format(fake, one, channels_last=True) is None
    planar = Problem.conv2d((1, 4, 5, 5), (4, 4, 1, 1))
    assert torch_peer.memory_format(fake, planar) is None
    # the pipeline's channels-last pass asks it of channels-first problems of every rank
    assert torch_peer.memory_format(fake, planar, channels_last=True) == "2d"
    assert torch_peer.memory_format(fake, Problem.conv3d((1, 2, 3, 4, 5), (2, 2, 1, 1, 1)),
                                    channels_last=True) == "3d"
    assert torch_peer.memory_format(fake, problem, channels_last=False) is None


@pytest.mark.skipif(not torch_peer.available(), reason="torch is not installed")
@pytest.mark.parametrize("direction", list(Direction))
def test_torch_convolution_of_rank_3(direction):
    """The peer calls torch's 3-D functions for a 3-D problem, on tensors in its layout."""
    import torch
    problem = Problem.convolution((1, 2, 3, 4, 5), (4, 2, 1, 3, 3), padding=(0, 1, 1),
                                  direction=direction, layout="NDHWC")
    call, op = torch_peer._convolution(torch, problem, "cpu", torch_peer.memory_format(torch,
                                                                                       problem))
    assert op.startswith("conv3d") and tuple(call().shape) == getattr(
        problem, direction.output).shape


@pytest.mark.skipif(not torch_peer.available(), reason="torch is not installed")
@pytest.mark.parametrize("parts", ["bias.residual.relu", "scale.bias.leaky_relu.blend",
                                   "residual.elu"])
@pytest.mark.parametrize("rank", [2, 3])
def test_torch_epilogue_is_the_same_computation(parts, rank):
    """The peer's eager epilogue computes what convsolve's reference does (beta 1), in 2-D and
    3-D, so the comparison times the same work."""
    import numpy as np
    import torch
    from convsolve import Epilogue, reference
    from convsolve.device.tensors import random_epilogue_tensors, random_tensors
    problem = (Problem.conv2d((2, 4, 7, 6), (6, 2, 3, 3), stride=(2, 1), padding=1, groups=2)
               if rank == 2 else Problem.conv3d((2, 4, 3, 7, 6), (6, 2, 1, 3, 3),
                                                stride=(1, 2, 1), padding=1, groups=2))
    problem = problem.with_epilogue(Epilogue.from_key("epi." + parts))
    host = {**random_tensors(problem, 3), **random_epilogue_tensors(problem, 4)}
    tensors = {name: torch.from_numpy(host[name]) if name in host else None
               for name in ("x", "w", "scale", "bias", "z")}
    tensors["prior"] = torch.from_numpy(host["y"].copy())
    call, op = torch_peer.epilogue_call(torch, problem, "cpu", tensors,
                                        torch_peer.torch_args(problem))
    expected = reference.compute(problem, host["x"], host["w"], host["y"], beta=1.0,
                                 **{n: host[n] for n in ("scale", "bias", "z") if n in host})
    assert op.startswith("eager")
    assert np.abs(call().numpy() - expected).max() < 1e-5 * max(1.0, np.abs(expected).max())


def _serve_fake_torch(monkeypatch, conv2d, samples=3, setup=None,
                      randn=lambda *args, **kwargs: None):
    """The answers of a CPU worker whose torch is fake (conv2d and randn the given functions) to
    hello, ``setup`` (default: the setup of a small forward problem), and ``samples`` time
    requests (pass requests when ``setup`` is a pipeline's), each after a 5 ms pause (the
    bench's, while the other side runs)."""
    space = types.SimpleNamespace
    monkeypatch.setitem(sys.modules, "torch", space(
        __version__="fake", float32="float32", randn=randn, channels_last="channels_last",
        get_num_threads=lambda: 2, cuda=space(is_available=lambda: False),
        nn=space(functional=space(conv2d=conv2d), grad=None)))
    problem = Problem.conv2d((2, 4, 8, 8), (8, 4, 3, 3), padding=1)
    setup = setup or {"op": "setup", "problem": problem.key()}
    sample = {"op": "pass", "name": setup["name"]} if "name" in setup else {"op": "time"}

    def requests():
        yield json.dumps({"op": "hello", "device": "cpu"})
        yield json.dumps(setup)
        for _ in range(samples):
            time.sleep(0.005)
            yield json.dumps(sample)
    out = io.StringIO()
    torch_peer._serve(requests(), out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_worker_times_back_to_back_calls_not_the_call_after_a_pause(monkeypatch):
    """A CPU worker's sample is the median of back-to-back calls after a wake-up, as a framework
    calls: a fake torch whose first call after 2 ms idle sleeps 20 ms (its threads fell asleep)
    never gives the figure, though the bench pauses 5 ms before each request."""
    state = {"last": 0.0, "calls": 0}

    def conv2d(*args):
        if time.perf_counter() - state["last"] > 0.002:
            time.sleep(0.02)
        state["last"], state["calls"] = time.perf_counter(), state["calls"] + 1
    answers = _serve_fake_torch(monkeypatch, conv2d)
    assert answers[1] == {"ok": True, "op": "conv2d"}
    assert len(answers) == 5 and all(answer["ms"] < 10 for answer in answers[2:])
    assert state["calls"] >= 4 * (1 + hot_loop.MIN_CALLS)


def test_worker_lets_each_output_go_before_the_next_call(monkeypatch):
    """The worker keeps no output of the calls it times, as a framework's hot loop keeps none:
    kept outputs would make every call of a sample write fresh memory."""
    live = {"now": 0, "most": 0}

    class Output:
        def __init__(self):
            live["now"] += 1
            live["most"] = max(live["most"], live["now"])

        def __del__(self):
            live["now"] -= 1
    answers = _serve_fake_torch(monkeypatch, lambda *args: Output(), samples=2)
    assert len(answers) == 4 and live["most"] <= 2


@pytest.mark.parametrize("channels_last", [False, True])
def test_worker_pipeline_pass_calls_each_layer_count_times(monkeypatch, channels_last):
    """A pipeline pass calls each layer count times in order, on tensors in the layout asked
    for; its sample is the median of back-to-back passes, with no host time on the CPU."""
    order, layouts = [], []

    class Tensor:
        def __init__(self, shape):
            self.shape = shape

        def contiguous(self, memory_format):
            layouts.append(memory_format)
            return self
    keys = [Problem.conv2d((1, c, 6, 6), (4, c, 3, 3), padding=1).key() for c in (2, 3)]
    answers = _serve_fake_torch(
        monkeypatch, lambda x, *args: order.append(x.shape[1]), samples=2,
        randn=lambda shape, **kwargs: Tensor(shape),
        setup={"op": "pipeline", "name": "p", "layers": [[keys[0], 2], [keys[1], 1]],
               "channels_last": channels_last})
    assert answers[1] == {"ok": True, "op": "conv2d"}
    assert layouts == (["channels_last"] * 6 if channels_last else [])
    assert order[:2 * torch_peer.WARMUP] == [2] * torch_peer.WARMUP + [3] * torch_peer.WARMUP
    passes = order[2 * torch_peer.WARMUP:]
    assert passes and passes == [2, 2, 3] * (len(passes) // 3)
    for answer in answers[2:]:
        assert answer["ms"] > 0 and answer["host_ms"] is None
        assert answer["passes"] >= hot_loop.MIN_CALLS
