"""Tests of `convsolve bench`: suite files, flop and peak arithmetic, and the command on the tiny suite."""
import argparse
import io
import json
import sys
from types import SimpleNamespace

import pyopencl as cl
import pytest
from convsolve import Direction, Problem, bench, bench_peak, bench_report, bench_torch, registry
from convsolve.errors import ConvsolveError, ValidationError

NETWORKS = {  # suite: (distinct shapes, layers, GFLOP per 224x224 image) from the issue and data
    "resnet50": (23, 53, 8.1743), "vgg16": (9, 13, 30.6933), "mobilenet_v2": (30, 52, 0.599)}


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    """Empty find-db and kernel cache in a temporary directory."""
    monkeypatch.setenv("CONVSOLVE_USER_DB_PATH", str(tmp_path / "db.sqlite"))
    monkeypatch.setenv("CONVSOLVE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CONVSOLVE_SYSTEM_DB_PATH", str(tmp_path / "none.jsonl"))
    return tmp_path


def bench_main(argv):
    """Parse ``argv`` with a parser holding only the bench subcommand, and run it."""
    parser = argparse.ArgumentParser(prog="convsolve")
    bench.add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["bench", *argv])
    return args.func(args)


# {{{ suite files

def test_shipped_suites():
    """The package ships the network suites, DeepBench's subset and the tiny test suite."""
    assert {"resnet50", "vgg16", "mobilenet_v2", "deepbench", "tiny"} <= set(bench.suite_names())


@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_network_counts(name):
    """Each network suite has the issue's distinct shapes, layer count and FLOPs per image."""
    distinct, layers, gflop = NETWORKS[name]
    suite = bench.load_suite(name)
    assert len(suite["layers"]) == distinct == suite["distinct_layers"]
    assert sum(layer["count"] for layer in suite["layers"]) == layers == suite["layers_total"]
    assert all(layer["count"] == len(layer["members"]) for layer in suite["layers"])
    flops = sum(layer["count"] * bench.layer_problem(layer, 1, "fwd").flops
                for layer in suite["layers"])
    assert flops / 1e9 == pytest.approx(gflop, rel=1e-3)
    assert "networks_conv.json" in suite["source"]


def test_mobilenet_has_depthwise_and_pointwise():
    """MobileNet-v2's suite holds depthwise 3x3 (groups = C = K) and pointwise 1x1 layers."""
    layers = bench.load_suite("mobilenet_v2")["layers"]
    depthwise = [l for l in layers if l["groups"] > 1]
    assert depthwise and all(l["groups"] == l["c"] == l["k"] and l["r"] == 3 for l in depthwise)
    assert sum(l["count"] for l in depthwise) == 17
    assert any(l["r"] == l["s"] == 1 and l["groups"] == 1 for l in layers)


def test_deepbench_subset():
    """DeepBench's subset is training problems with their own batch, small enough to run."""
    suite = bench.load_suite("deepbench")
    assert "DeepBench" in suite["source"] and suite["layers"]
    assert all(1 <= l["n"] <= 8 for l in suite["layers"])
    assert sum(bench.layer_problem(l, None, "fwd").flops for l in suite["layers"]) < 40e9
    assert bench.layer_problem(suite["layers"][0], 2, "fwd").n == 2  # --batch overrides n


@pytest.mark.parametrize("name", ["resnet50", "vgg16", "mobilenet_v2", "deepbench", "tiny"])
def test_every_entry_is_a_valid_problem(name):
    """Every entry of every suite is a valid Problem in all three directions."""
    for layer in bench.load_suite(name)["layers"]:
        for direction in Direction:
            problem = bench.layer_problem(layer, 2, direction)
            assert problem.k == layer["k"] and problem.groups == layer.get("groups", 1)
            assert Problem.from_key(problem.key()) == problem


def test_load_suite_errors(tmp_path):
    """An unknown suite or an entry lacking a field is a ValidationError naming it."""
    with pytest.raises(ValidationError, match="resnet50"):
        bench.load_suite("resnet51")
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"name": "bad", "layers": [{"name": "x", "c": 1}]}))
    with pytest.raises(ValidationError, match="lacks"):
        bench.load_suite(str(path))


def test_select_layers():
    """--layers takes indices, ranges and name substrings, and refuses an empty selection."""
    layers = bench.load_suite("resnet50")["layers"]
    assert [i for i, _ in bench.select_layers(layers, "0,3-5")] == [0, 3, 4, 5]
    assert next(l["name"] for _, l in bench.select_layers(layers, "conv1")) == "conv1"
    assert [i for i, _ in bench.select_layers(layers, "layer4.1")] == [19, 21, 22]  # members
    assert len(bench.select_layers(layers, None)) == 23
    with pytest.raises(ValidationError):
        bench.select_layers(layers, "nosuchlayer")


def test_parse_directions():
    """--directions takes a comma list of fwd, bwd, wrw, or all."""
    assert bench.parse_directions("fwd,wrw") == [Direction.FORWARD, Direction.BACKWARD_WEIGHTS]
    assert bench.parse_directions("all") == list(Direction)

# }}}


# {{{ arithmetic

def test_flops_and_gflops():
    """ResNet-50's stem at batch 8 is 1.888 GFLOP; GFLOP/s is flops / time."""
    stem = bench.load_suite("resnet50")["layers"][0]
    assert bench.layer_problem(stem, 8, "fwd").flops == 2 * 8 * 64 * 112 * 112 * 3 * 7 * 7
    assert bench_report.gflops(2e9, 1000.0) == pytest.approx(2.0)
    assert bench_report.gflops(1, 0) is None


def test_network_total_weighs_by_count():
    """Totals weigh each layer's time and flops by its count; ratio = torch time / ours."""
    rows = [{"count": 3, "flops": 1e9, "time_ms": 2.0, "wall_ms": 2.5, "torch_ms": 4.0,
             "torch_default_ms": 8.0, "compare_wall": False},
            {"count": 1, "flops": 4e9, "time_ms": 10.0, "wall_ms": 11.0, "torch_ms": 5.0,
             "torch_default_ms": None, "compare_wall": False}]
    total = bench.network_total(rows, peak_gflops=2.0)
    assert total["layers"] == 4 and total["distinct"] == 2
    assert total["flops"] == 7e9 and total["time_ms"] == 16.0 and total["torch_ms"] == 17.0
    assert total["gflops"] == pytest.approx(7e9 / 16e6)
    assert total["peak_fraction"] == pytest.approx(total["gflops"] / 2.0)
    assert total["ratio"] == pytest.approx(17.0 / 16.0)
    assert total["torch_default_ms"] is None  # one layer lacks it: no partial sum
    rows[0]["compare_wall"] = True
    assert bench.network_total(rows)["ratio"] == pytest.approx(17.0 / 18.5)


def test_peak_arithmetic():
    """FMA launches count 2 flops per lane per chain per iteration; a copy reads and writes."""
    assert bench_peak.fma_flops(1024, 8, 12, 1000) == 2 * 1024 * 8 * 12 * 1000
    assert bench_peak.copy_bytes(1 << 20) == 8 << 20
    assert bench_peak.rate(2e9, 1000.0) == pytest.approx(2.0)
    assert bench_peak.rate(1, 0) == 0.0


def test_fma_configs():
    """CPUs get explicit vectors of their preferred width, GPUs short ones."""
    cpu = SimpleNamespace(type=cl.device_type.CPU, preferred_vector_width_float=8)
    gpu = SimpleNamespace(type=cl.device_type.GPU, preferred_vector_width_float=1)
    assert all(width == 8 for width, _ in bench_peak.fma_configs(cpu))
    assert bench_peak.fma_configs(gpu) == bench_peak.GPU_FMA_CONFIGS


def test_measure_peak(isolated):
    """The measured peak is positive and names the winning configuration."""
    from convsolve import Handle
    peak = bench_peak.measure_peak(Handle(), target_ms=5.0)
    assert peak["gflops"] > 0 and peak["gbps"] > 0
    assert f"{peak['fma']['PEAK_VW']}x{peak['fma']['PEAK_CHAINS']}" in peak["fma"]["all"]

# }}}


# {{{ the command

def test_bench_tiny_json(isolated, capsys):
    """bench on the tiny suite reports every layer and direction, with count-weighted totals."""
    assert bench_main(["--suite", "tiny", "--directions", "fwd,wrw", "--repeat", "2",
                       "--peak", "100", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [r["direction"] for r in report["results"]] == ["fwd", "wrw"]
    for result in report["results"]:
        rows = result["rows"]
        assert len(rows) == 3 and all(r["solver"] in registry().solvers for r in rows)
        assert all(r["time_ms"] > 0 and r["rounds"] == 2 for r in rows)
        assert result["total"]["layers"] == 4
        assert result["total"]["time_ms"] == pytest.approx(sum(r["count"] * r["time_ms"]
                                                               for r in rows))
        assert rows[0]["peak_fraction"] == pytest.approx(
            rows[0]["flops"] / rows[0]["time_ms"] / 1e6 / 100)


def test_bench_table_and_layer_filter(isolated, capsys):
    """The table names the layers selected and ends each direction with a total row."""
    assert bench_main(["--suite", "tiny", "--layers", "depthwise", "--repeat", "1",
                       "--peak", "100"]) == 0
    out = capsys.readouterr().out
    assert "depthwise" in out and "conv3x3" not in out and "total (1 layers)" in out


def test_bench_subtotal_of_1x1_layers(isolated, capsys):
    """A suite mixing filter sizes gets a 1x1 subtotal row; an all-1x1 selection does not."""
    assert bench_main(["--suite", "tiny", "--layers", "0,1", "--repeat", "1", "--peak", "100",
                       "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    one_by_one = report["results"][0]["rows"][1]
    assert one_by_one["name"] == "conv1x1s2"
    line = next(line for line in bench_report.format_report(report).splitlines()
                if "1x1 layers" in line)
    assert line.split()[:4] == ["1x1", "layers", "(1", "layers)"]
    assert f"{one_by_one['time_ms']:.3f}" in line
    assert "1x1 layers" not in bench_report.format_report(
        dict(report, results=[dict(r, rows=r["rows"][1:]) for r in report["results"]]))


@pytest.mark.skipif(not bench_torch.available(), reason="torch is not installed")
def test_bench_compare_torch(isolated, capsys):
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


def test_compare_without_torch(isolated, monkeypatch, capsys):
    """--compare torch without torch installed still benchmarks, and says why nothing compares."""
    monkeypatch.setattr(bench_torch, "available", lambda: False)
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
        bench_torch.torch_args(problem)


def test_plot_needs_matplotlib(isolated, monkeypatch, tmp_path):
    """--plot without matplotlib fails before measuring, saying how to install it."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ConvsolveError, match="pip install matplotlib"):
        bench_main(["--suite", "tiny", "--plot", str(tmp_path / "p.png")])


def test_plot_writes_png(isolated, tmp_path, capsys):
    """--plot draws the per-layer bars to the file."""
    pytest.importorskip("matplotlib")
    path = tmp_path / "p.png"
    assert bench_main(["--suite", "tiny", "--layers", "0-1", "--repeat", "1", "--peak", "100",
                       "--plot", str(path)]) == 0
    assert path.read_bytes()[:4] == b"\x89PNG"


def test_overhead(isolated, capsys):
    """--overhead: cold find benchmarks, warm find in a fresh process hits the find-db."""
    assert bench_main(["--suite", "tiny", "--layers", "0", "--overhead", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["rows"][0]
    assert row["cold"]["source"] == "benchmark" and row["warm"]["source"] == "find-db"
    assert row["cold"]["find_ms"] > 0 and row["warm"]["find_ms"] > 0
    assert row["run"]["run_us"] > 0 and row["run"]["enqueue_us"] > 0


def test_render_markdown(isolated, tmp_path, capsys):
    """A report saved with --json renders again as Markdown tables with --render."""
    assert bench_main(["--suite", "tiny", "--layers", "1", "--repeat", "1", "--peak", "100",
                       "--json"]) == 0
    saved = tmp_path / "report.json"
    saved.write_text(capsys.readouterr().out)
    assert bench_main(["--render", str(saved), "--markdown"]) == 0
    out = capsys.readouterr().out
    assert "| conv1x1s2 |" in out
    assert out.count("|---:") >= 1 and "total (1 layers)" in out


def test_progress_only_on_a_terminal():
    """The progress bar is drawn on a terminal and not into a pipe or file."""
    quiet = bench.Progress(3, io.StringIO())
    quiet.show("x")
    assert not quiet.active and quiet.stream.getvalue() == ""
    tty = io.StringIO()
    tty.isatty = lambda: True
    bar = bench.Progress(2, tty)
    bar.step()
    bar.show("fwd conv1")
    bar.close()
    assert "1/2 fwd conv1" in tty.getvalue() and "#" * 15 in tty.getvalue()

# }}}
