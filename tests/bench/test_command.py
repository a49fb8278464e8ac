"""Tests of `convsolve bench`'s command: suite files, layer selection, runs on the tiny suite."""
import io
import json
import statistics

import pytest
from convsolve import Direction, Problem, bench, registry
from convsolve.bench import command, hot_loop, report
from convsolve.errors import ValidationError

NETWORKS = {  # suite: (distinct shapes, layers, GFLOP per 224x224 image) from the issue and data
    "resnet50": (23, 53, 8.1743), "vgg16": (9, 13, 30.6933), "mobilenet_v2": (30, 52, 0.599)}


# {{{ suite files

def test_shipped_suites():
    """The package ships the network suites, DeepBench's subset and the tiny test suite."""
    assert {"resnet50", "vgg16", "mobilenet_v2", "deepbench", "tiny", "r3d_18",
            "wav2vec2"} <= set(command.suite_names())


@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_network_counts(name):
    """Each network suite has the issue's distinct shapes, layer count and FLOPs per image."""
    distinct, layers, gflop = NETWORKS[name]
    suite = command.load_suite(name)
    assert len(suite["layers"]) == distinct == suite["distinct_layers"]
    assert sum(layer["count"] for layer in suite["layers"]) == layers == suite["layers_total"]
    assert all(layer["count"] == len(layer["members"]) for layer in suite["layers"])
    flops = sum(layer["count"] * command.layer_problem(layer, 1, "fwd").flops
                for layer in suite["layers"])
    assert flops / 1e9 == pytest.approx(gflop, rel=1e-3)
    assert "networks_conv.json" in suite["source"]


def test_mobilenet_has_depthwise_and_pointwise():
    """MobileNet-v2's suite holds depthwise 3x3 (groups = C = K) and pointwise 1x1 layers."""
    layers = command.load_suite("mobilenet_v2")["layers"]
    depthwise = [l for l in layers if l["groups"] > 1]
    assert depthwise and all(l["groups"] == l["c"] == l["k"] and l["r"] == 3 for l in depthwise)
    assert sum(l["count"] for l in depthwise) == 17
    assert any(l["r"] == l["s"] == 1 and l["groups"] == 1 for l in layers)


def test_deepbench_subset():
    """DeepBench's subset is training problems with their own batch, small enough to run."""
    suite = command.load_suite("deepbench")
    assert "DeepBench" in suite["source"] and suite["layers"]
    assert all(1 <= l["n"] <= 8 for l in suite["layers"])
    assert sum(command.layer_problem(l, None, "fwd").flops for l in suite["layers"]) < 40e9
    assert command.layer_problem(suite["layers"][0], 2, "fwd").n == 2  # --batch overrides n


def test_rank_suites():
    """R3D-18 is 3-D (40.7 GMACs a 16-frame 112x112 clip, torchvision's figure), wav2vec 2.0's
    encoder 1-D (one second of 16 kHz audio down to 49 frames, then the grouped positional
    convolution); both are channels-first and count their layers."""
    for name, rank in (("r3d_18", 3), ("wav2vec2", 1)):
        suite = command.load_suite(name)
        problems = [command.layer_problem(l, 1, "fwd") for l in suite["layers"]]
        assert {p.spatial_dims for p in problems} == {rank}
        assert all(not p.x.channels_last for p in problems)
        assert sum(l["count"] for l in suite["layers"]) == suite["layers_total"]
    r3d = command.load_suite("r3d_18")["layers"]
    macs = sum(l["count"] * command.layer_problem(l, 1, "fwd").flops for l in r3d) / 2
    assert macs / 1e9 == pytest.approx(40.70, abs=0.01)
    encoder = [command.layer_problem(l, 1, "fwd") for l in command.load_suite("wav2vec2")["layers"]]
    assert encoder[-2].out_sizes == (49,) and encoder[-1].groups == 16


def test_layer_layout_and_sizes_of_any_rank(tmp_path):
    """A suite entry gives "in" and "fil" for any rank and may name a layout; one lacking both
    size forms is refused, naming the shorter list of what is missing."""
    layer = {"name": "a", "c": 4, "k": 8, "in": [5, 6, 7], "fil": [1, 3, 3], "stride": [1, 2, 2],
             "pad": [0, 1, 1], "count": 1, "layout": "NDHWC"}
    problem = command.layer_problem(layer, 2, "wrw")
    assert problem.x.shape == (2, 4, 5, 6, 7) and problem.w.layout == "NDHWC"
    assert report.shape(problem) == "n2 c4 5x6x7 k8 1x3x3/1x2x2 p0x1x1 NDHWC"
    path = tmp_path / "bad.json"
    del layer["fil"]
    path.write_text(json.dumps({"name": "bad", "layers": [layer]}))
    with pytest.raises(ValidationError, match=r"lacks \['fil'\]"):
        command.load_suite(str(path))


@pytest.mark.parametrize("name", ["resnet50", "vgg16", "mobilenet_v2", "deepbench", "tiny",
                                  "r3d_18", "wav2vec2"])
def test_every_entry_is_a_valid_problem(name):
    """Every entry of every suite is a valid Problem in all three directions."""
    for layer in command.load_suite(name)["layers"]:
        for direction in Direction:
            problem = command.layer_problem(layer, 2, direction)
            assert problem.k == layer["k"] and problem.groups == layer.get("groups", 1)
            assert Problem.from_key(problem.key()) == problem


def test_load_suite_errors(tmp_path):
    """An unknown suite or an entry lacking a field is a ValidationError naming it."""
    with pytest.raises(ValidationError, match="resnet50"):
        command.load_suite("resnet51")
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"name": "bad", "layers": [{"name": "x", "c": 1}]}))
    with pytest.raises(ValidationError, match="lacks"):
        command.load_suite(str(path))


def test_select_layers():
    """--layers takes indices, ranges and name substrings, and refuses an empty selection."""
    layers = command.load_suite("resnet50")["layers"]
    assert [i for i, _ in command.select_layers(layers, "0,3-5")] == [0, 3, 4, 5]
    assert next(l["name"] for _, l in command.select_layers(layers, "conv1")) == "conv1"
    assert [i for i, _ in command.select_layers(layers, "layer4.1")] == [19, 21, 22]  # members
    assert len(command.select_layers(layers, None)) == 23
    with pytest.raises(ValidationError):
        command.select_layers(layers, "nosuchlayer")


def test_parse_directions():
    """--directions takes a comma list of fwd, bwd, wrw, or all."""
    assert command.parse_directions("fwd,wrw") == [Direction.FORWARD, Direction.BACKWARD_WEIGHTS]
    assert command.parse_directions("all") == list(Direction)


def test_flops():
    """ResNet-50's stem at batch 8 is 1.888 GFLOP."""
    stem = command.load_suite("resnet50")["layers"][0]
    assert command.layer_problem(stem, 8, "fwd").flops == 2 * 8 * 64 * 112 * 112 * 3 * 7 * 7

# }}}


# {{{ the command

def test_bench_tiny_json(isolated, capsys, bench_main):
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


def test_our_side_is_timed_in_a_hot_loop(isolated, capsys, monkeypatch, bench_main):
    """Our wall ms is the median over rounds of hot-loop samples (each the median of at least
    MIN_CALLS back-to-back run() calls; the first, unreported, taken before the rounds), not of
    single calls after the pause between sides."""
    medians, sizes, real = [], [], hot_loop.HotLoop.sample

    def recorded(loop):
        timed = real(loop)
        medians.append(hot_loop.median_ms(timed))
        sizes.append(len(timed))
        return timed
    monkeypatch.setattr(hot_loop.HotLoop, "sample", recorded)
    assert bench_main(["--suite", "tiny", "--layers", "0", "--repeat", "3", "--peak", "100",
                       "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["results"][0]["rows"][0]
    assert row["rounds"] == len(medians) - 1 == 3 and min(sizes) >= hot_loop.MIN_CALLS
    assert row["wall_ms"] == statistics.median(medians[1:])


def test_bench_table_and_layer_filter(isolated, capsys, bench_main):
    """The table names the layers selected and ends each direction with a total row."""
    assert bench_main(["--suite", "tiny", "--layers", "depthwise", "--repeat", "1",
                       "--peak", "100"]) == 0
    out = capsys.readouterr().out
    assert "depthwise" in out and "conv3x3" not in out and "total (1 layers)" in out


def test_bench_with_an_epilogue(isolated, capsys, bench_main):
    """--epilogue times each forward layer with that epilogue (find ranks its candidates)."""
    assert bench_main(["--suite", "tiny", "--layers", "0", "--repeat", "1", "--peak", "100",
                       "--epilogue", "bias.residual.relu", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["results"][0]["rows"][0]
    assert row["problem"].endswith("-epi.bias.residual.relu") and row["time_ms"] > 0


def test_epilogue_option_errors():
    """A malformed --epilogue, and forward parts for a backward direction, are refused by name."""
    assert command.parse_epilogue("epi.bias.relu") == command.parse_epilogue("bias.relu")
    with pytest.raises(ValidationError, match="--epilogue='relu.bias'"):
        command.parse_epilogue("relu.bias")
    with pytest.raises(ValidationError, match="takes alpha and blend"):
        command.parse_epilogue("bias").check(Direction.BACKWARD_DATA)


def test_progress_only_on_a_terminal():
    """The progress bar is drawn on a terminal and not into a pipe or file."""
    quiet = command.Progress(3, io.StringIO())
    quiet.show("x")
    assert not quiet.active and quiet.stream.getvalue() == ""
    tty = io.StringIO()
    tty.isatty = lambda: True
    bar = command.Progress(2, tty)
    bar.step()
    bar.show("fwd conv1")
    bar.close()
    assert "1/2 fwd conv1" in tty.getvalue() and "#" * 15 in tty.getvalue()


def test_main_on_its_own(capsys):
    """`python -m convsolve.bench` (convsolve.bench.main) reports an error in one line, status 1."""
    assert bench.main(["--suite", "resnet51"]) == 1
    assert capsys.readouterr().err.startswith("convsolve: error: invalid --suite='resnet51'")

# }}}
