"""dev.py test's halves: each a plain pytest process, its lines relayed with its name, and a
half whose process dies (as in a crash inside an OpenCL runtime) failing the run by its signal."""
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _dev():
    spec = importlib.util.spec_from_file_location("dev", ROOT / "dev.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_half_that_dies_fails_the_run_naming_its_signal(tmp_path, monkeypatch, capsys):
    dev = _dev()
    (tmp_path / "fine").mkdir()
    (tmp_path / "fine" / "test_fine.py").write_text("def test_fine():\n    pass\n")
    (tmp_path / "dies").mkdir()
    (tmp_path / "dies" / "test_dies.py").write_text(
        "import os\n\ndef test_dies():\n    os.abort()\n")
    monkeypatch.setattr(dev, "ROOT", tmp_path)
    monkeypatch.setattr(dev, "BIN", Path(sys.executable).parent)
    monkeypatch.setattr(dev, "SHARDS", {"fine": ["-p", "no:cacheprovider", "fine"],
                                        "dies": ["-p", "no:cacheprovider", "dies"]})
    assert dev.run_shards() == 1
    out = capsys.readouterr().out
    assert "[fine] " in out and "1 passed" in out
    assert "[dev.py] [fine] passed" in out
    assert "[dev.py] [dies] failed (killed by signal 6)" in out
    monkeypatch.setattr(dev, "SHARDS", {"fine": ["-p", "no:cacheprovider", "fine"]})
    assert dev.run_shards() == 0


def test_demo_installs_the_test_extra(monkeypatch):
    """dev.py demo sets .venv up with the test extra as dev.py test does, so that a plugin
    author's first `pytest` is .venv's, not the system's."""
    dev = _dev()
    extras, commands = [], []
    monkeypatch.setattr(dev, "ensure_opencl", lambda: None)
    monkeypatch.setattr(dev, "ensure_venv", extras.append)
    monkeypatch.setattr(dev.subprocess, "run", lambda args, **kwargs: commands.append(args)
                        or dev.subprocess.CompletedProcess(args, 0))
    monkeypatch.setattr(sys, "argv", ["dev.py", "demo"])
    assert dev.main() == 0
    assert extras == ["test,dask"] and commands[0][1:] == dev.DEMO
