"""The repository is clean under ruff's rules (pyproject.toml's [tool.ruff], the pinned release)."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytest.importorskip("ruff", reason="ruff comes with the test extra (pip install -e .[test])")


def test_ruff_finds_nothing():
    """`ruff check` over the whole checkout reports no finding."""
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", str(ROOT)],
                          capture_output=True, text=True, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_ruff_sees_a_finding(tmp_path):
    """The same command fails on a planted finding (an unused import), so a pass means clean."""
    (tmp_path / "planted.py").write_text('"""Planted."""\nimport os\n')
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--config",
                           str(ROOT / "pyproject.toml"), str(tmp_path)],
                          capture_output=True, text=True, cwd=tmp_path, check=False)
    assert done.returncode == 1 and "F401" in done.stdout, done.stdout + done.stderr
