"""The line budget holds: scripts/loc.py counts code lines per package and module."""
import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "loc.py"
spec = importlib.util.spec_from_file_location("loc", SCRIPT)
loc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(loc)


def test_counts_skip_docstrings_comments_and_blanks():
    """Only code lines count, in Python and in OpenCL."""
    source = '"""Module doc."""\n\n# comment\ndef f():\n    """Doc\n    more."""\n    return 1\n'
    assert loc.python_lines(source) == 2
    assert loc.opencl_lines("/* banner\n * more */\n\nint a; // note\n/* x */ int b;\n") == 2


def test_every_package_is_within_budget(capsys):
    """The core, bench and every plugin stay within their budgets; no module passes 400 lines."""
    assert loc.main() == 0, capsys.readouterr().out
