"""Tests of bench --pipeline: a suite's layers through plans back to back, one finish a pass."""
import json
import sys
import types

import pytest
from convsolve.bench import report as bench_report
from convsolve.bench import torch_peer
from convsolve.engine.plan import Plan
from convsolve.errors import ValidationError


def test_pipeline_tiny_json(isolated, monkeypatch, capsys, bench_main):
    """--pipeline on the tiny suite: a pass is every layer count times, each call a plan.run of
    the layer's one plan (on the handle's plain queue), which runs find's pick; the kernel time
    comes from a pass of the same layers' plans on the profiling queue after each sample;
    without torch the report has convsolve's side alone and says why."""
    monkeypatch.setattr(torch_peer, "available", lambda: False)
    calls, original = [], Plan.run

    def counted(self, **kwargs):
        calls.append(self)
        return original(self, **kwargs)
    monkeypatch.setattr(Plan, "run", counted)
    assert bench_main(["--suite", "tiny", "--pipeline", "--repeat", "2", "--compare", "torch",
                       "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["pipeline"] and report["torch"] == "not compared: torch is not installed"
    (result,) = report["results"]
    ours = result["convsolve"]
    assert result["calls"] == sum(layer["count"] for layer in result["layers"]) == 4
    plain = [p for p in calls if not p.handle.profiling]
    profiled = [p for p in calls if p.handle.profiling]
    assert result["plans"] == result["distinct"] == len({id(p) for p in plain}) == 3
    assert len({id(p) for p in profiled}) == 3 and {p.solver for p in plain} == {
        p.solver for p in profiled}
    assert len(plain) % 4 == 0 and len(plain) >= 4 * ours["passes"] >= 4 * 2 * 3
    assert len(profiled) == 4 * (1 + 2)   # one pass to warm, then one a sample, a round each
    assert len(ours["round_ms"]) == 2 and min(ours["round_ms"]) <= ours["pass_ms"]
    assert all(layer["solver"] == layer["find_solver"] for layer in result["layers"])
    assert ours["kernel_ms"] > 0 and ours["host_us_per_call"] > 0
    assert ours["pass_ms"] >= ours["host_ms"] == pytest.approx(ours["host_us_per_call"] * 4e-3)
    assert result["torch"] == {} and result["ratio"] == {}


@pytest.mark.skipif(not torch_peer.available(), reason="torch is not installed")
def test_pipeline_compare_torch(isolated, capsys, bench_main):
    """--pipeline --compare torch times torch's same pass (on a CPU in NCHW and channels_last,
    with and without the malloc thresholds) and each speedup is its pass over ours."""
    assert bench_main(["--suite", "tiny", "--pipeline", "--repeat", "1", "--compare", "torch",
                       "--json"]) == 0
    (result,) = json.loads(capsys.readouterr().out)["results"]
    labels = {"torch", "torch channels_last"} | ({"torch-default"} if "torch-default" in
                                                 result["torch"] else set())
    assert set(result["torch"]) == set(result["ratio"]) == labels and len(labels) >= 2
    for label, side in result["torch"].items():
        assert side["pass_ms"] > 0 and side["passes"] >= 1
        assert result["ratio"][label] == pytest.approx(side["pass_ms"] /
                                                       result["convsolve"]["pass_ms"])


def test_pipeline_constant_weights(isolated, monkeypatch, capsys, bench_main):
    """--constant-weights: every pass runs plans made for constant weights (inference), and
    the report and its table say so."""
    monkeypatch.setattr(torch_peer, "available", lambda: False)
    constant, original = set(), Plan.run

    def seen(self, **kwargs):
        constant.add(self.constant_weights)
        return original(self, **kwargs)
    monkeypatch.setattr(Plan, "run", seen)
    assert bench_main(["--suite", "tiny", "--pipeline", "--constant-weights", "--repeat", "1",
                       "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["constant_weights"] is True and constant == {True}
    assert "batch 1, constant weights" in bench_report.format_pipeline(
        {**report, "batch": 1})


def test_constant_weights_is_inference_in_a_pipeline(bench_main):
    """--constant-weights is refused outside --pipeline and with backward-weights (which writes
    the weights), naming the flag, before any device work."""
    for argv in (["--constant-weights"], ["--pipeline", "--constant-weights", "--directions",
                                          "fwd,wrw"]):
        with pytest.raises(ValidationError, match="invalid --constant-weights="):
            bench_main(["--suite", "tiny", *argv])


def test_pipeline_refuses_what_it_does_not_run(monkeypatch, tmp_path, bench_main):
    """--pipeline with --epilogue or --plot is refused, naming the flag, before any device work;
    so is --plot of a saved pipeline report."""
    monkeypatch.setitem(sys.modules, "matplotlib", types.ModuleType("matplotlib"))
    for extra in (["--epilogue", "bias.relu"], ["--plot", "out.png"]):
        with pytest.raises(ValidationError, match=f"invalid {extra[0]}="):
            bench_main(["--suite", "tiny", "--pipeline", *extra])
    saved = tmp_path / "report.json"
    saved.write_text(json.dumps({"pipeline": True, "results": []}))
    with pytest.raises(ValidationError, match="invalid --plot="):
        bench_main(["--render", str(saved), "--json", "--plot", "out.png"])


def test_format_pipeline():
    """The pipeline table has convsolve's row and one per torch configuration, whose speedup is
    torch's pass over convsolve's."""
    side = {"pass_ms": 2.0, "host_ms": 1.0, "host_us_per_call": 250.0, "kernel_ms": 1.5,
            "passes": 9}
    torch = {"pass_ms": 3.0, "host_ms": None, "host_us_per_call": None, "kernel_ms": None,
             "passes": 7}
    report = {"suite": "tiny", "source": "s", "batch": 1, "rounds": 3, "device": "d",
              "torch": "torch 2 on the CPU", "load": [(1, 1, 1)], "results": [{
                  "direction": "fwd", "calls": 4, "distinct": 3, "plans": 3,
                  "convsolve": side, "torch": {"torch channels_last": torch},
                  "ratio": {"torch channels_last": 1.5}}]}
    text = bench_report.format_pipeline(report)
    assert "4 calls a pass, 3 layers, 3 plans" in text
    row = next(line for line in text.splitlines() if line.startswith("torch channels_last"))
    assert row.split()[-1] == "1.500" and row.split()[2] == "3.000"
    assert "| convsolve | 2.000 | 1.000 | 250.0 | 1.500 | 9 | - |" in \
        bench_report.format_pipeline(report, markdown=True)
