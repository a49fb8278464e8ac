"""Tests of the PyTorch peer: --compare torch with and without torch; what torch cannot take."""
import json

import pytest
from convsolve import Problem
from convsolve.bench import torch_peer
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
