"""The line budget holds: scripts/loc.py counts code lines per package and module, of the
checkout's files only (not the build/ copies a non-editable install leaves beside them)."""
import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "loc.py"
if not SCRIPT.exists():
    pytest.skip(f"no checkout here: {SCRIPT} is missing (the tests run from an installed copy?)",
                allow_module_level=True)
spec = importlib.util.spec_from_file_location("loc", SCRIPT)
loc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(loc)


def checkout_files():
    """The paths git lists as the checkout's files under core/ and plugins/: tracked ones and
    new ones it does not ignore (so not build/, *.egg-info or __pycache__); skips the test when
    ROOT is not a git checkout."""
    try:
        done = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others",
                               "--exclude-standard", "--", "core", "plugins"],
                              capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"{ROOT} is not a git checkout ({exc}): the budget counts a checkout's files")
    return sorted({path for path in done.stdout.decode().split("\0") if path})


def test_counts_skip_docstrings_comments_and_blanks():
    """Only code lines count, in Python and in OpenCL."""
    source = '"""Module doc."""\n\n# comment\ndef f():\n    """Doc\n    more."""\n    return 1\n'
    assert loc.python_lines(source) == 2
    assert loc.opencl_lines("/* banner\n * more */\n\nint a; // note\n/* x */ int b;\n") == 2


def test_every_package_is_within_budget(capsys, monkeypatch, tmp_path):
    """The core, bench and every plugin stay within their budgets; no module passes 400 lines.
    Counted over a copy of the checkout's files, so a build/ copy of a plugin (left by
    `pip install plugins/direct`) is not counted twice."""
    for name in checkout_files():
        if (ROOT / name).is_file():   # not a tracked file deleted in the work tree
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ROOT / name, tmp_path / name)
    monkeypatch.setattr(loc, "ROOT", tmp_path)
    assert loc.main() == 0, capsys.readouterr().out
