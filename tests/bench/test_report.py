"""Tests of bench reports: count-weighted totals, the 1x1 subtotal, Markdown and the plot."""
import json
import sys

import pytest
from convsolve.bench import report
from convsolve.errors import ConvsolveError

# {{{ totals

def test_gflops():
    """GFLOP/s is flops / time; without a time there is none."""
    assert report.gflops(2e9, 1000.0) == pytest.approx(2.0)
    assert report.gflops(1, 0) is None


def test_network_total_weighs_by_count():
    """Totals weigh each layer's time and flops by its count; ratio = torch time / ours."""
    rows = [{"count": 3, "flops": 1e9, "time_ms": 2.0, "wall_ms": 2.5, "torch_ms": 4.0,
             "torch_default_ms": 8.0, "compare_wall": False},
            {"count": 1, "flops": 4e9, "time_ms": 10.0, "wall_ms": 11.0, "torch_ms": 5.0,
             "torch_default_ms": None, "compare_wall": False}]
    total = report.network_total(rows, peak_gflops=2.0)
    assert total["layers"] == 4 and total["distinct"] == 2
    assert total["flops"] == 7e9 and total["time_ms"] == 16.0 and total["torch_ms"] == 17.0
    assert total["gflops"] == pytest.approx(7e9 / 16e6)
    assert total["peak_fraction"] == pytest.approx(total["gflops"] / 2.0)
    assert total["ratio"] == pytest.approx(17.0 / 16.0)
    assert total["torch_default_ms"] is None  # one layer lacks it: no partial sum
    rows[0]["compare_wall"] = True
    assert report.network_total(rows)["ratio"] == pytest.approx(17.0 / 18.5)

# }}}


# {{{ rendering

def test_bench_subtotal_of_1x1_layers(isolated, capsys, bench_main):
    """A suite mixing filter sizes gets a 1x1 subtotal row; an all-1x1 selection does not."""
    assert bench_main(["--suite", "tiny", "--layers", "0,1", "--repeat", "1", "--peak", "100",
                       "--json"]) == 0
    saved = json.loads(capsys.readouterr().out)
    one_by_one = saved["results"][0]["rows"][1]
    assert one_by_one["name"] == "conv1x1s2"
    line = next(line for line in report.format_report(saved).splitlines()
                if "1x1 layers" in line)
    assert line.split()[:4] == ["1x1", "layers", "(1", "layers)"]
    assert f"{one_by_one['time_ms']:.3f}" in line
    assert "1x1 layers" not in report.format_report(
        dict(saved, results=[dict(r, rows=r["rows"][1:]) for r in saved["results"]]))


def test_render_markdown(isolated, tmp_path, capsys, bench_main):
    """A report saved with --json renders again as Markdown tables with --render."""
    assert bench_main(["--suite", "tiny", "--layers", "1", "--repeat", "1", "--peak", "100",
                       "--json"]) == 0
    saved = tmp_path / "report.json"
    saved.write_text(capsys.readouterr().out)
    assert bench_main(["--render", str(saved), "--markdown"]) == 0
    out = capsys.readouterr().out
    assert "| conv1x1s2 |" in out
    assert out.count("|---:") >= 1 and "total (1 layers)" in out


def test_plot_needs_matplotlib(isolated, monkeypatch, tmp_path, bench_main):
    """--plot without matplotlib fails before measuring, saying how to install it."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ConvsolveError, match="pip install matplotlib"):
        bench_main(["--suite", "tiny", "--plot", str(tmp_path / "p.png")])


def test_plot_writes_png(isolated, tmp_path, capsys, bench_main):
    """--plot draws the per-layer bars to the file."""
    pytest.importorskip("matplotlib")
    path = tmp_path / "p.png"
    assert bench_main(["--suite", "tiny", "--layers", "0-1", "--repeat", "1", "--peak", "100",
                       "--plot", str(path)]) == 0
    assert path.read_bytes()[:4] == b"\x89PNG"

# }}}
