"""The public API and the contract are clean under mypy (pyproject.toml's [tool.mypy])."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytest.importorskip("mypy", reason="mypy comes with the test extra (pip install -e .[test])")

#: mypy's report of one error: path, line, code.
_ERROR = re.compile(r"^(?P<path>[^:\n]+):(?P<line>\d+): error: .*\[(?P<code>[\w-]+)\]$",
                    re.MULTILINE)
#: Lines appended to the planted api.py, each a wrong call or use of a typed public name, with
#: the error code mypy must give it: the numpy API, a Problem's key, find, and the Handle.
_PLANTED = [
    ("conv2d(np.zeros((1, 1, 4, 4), np.float32), np.zeros((1, 1, 3, 3), np.float32), stride='2')",
     "arg-type"),
    ("_key: int = Problem.conv2d((1, 1, 4, 4), (1, 1, 3, 3)).key()", "assignment"),
    ("find(default_handle(), Problem.conv2d((1, 1, 4, 4), (1, 1, 3, 3)), x=None, w='w', y=None)",
     "arg-type"),
    ("Handle().scratch('4096')", "arg-type"),
]
_UNTYPED = ("def default_handle() -> Handle:", "def default_handle():")


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    """A folder for MYPYPATH, where each run gets a fresh `convsolve` (core/'s files, linked),
    and mypy's cache: both runs check the same paths, so the second reuses the first's work."""
    return tmp_path_factory.mktemp("mypy")


def _mypy(place, api_text=None):
    """The documented command, mypy with the project's config from the repository root, on a
    `convsolve` whose entries are links to core/'s, api.py replaced by ``api_text`` if given."""
    package = place / "path" / "convsolve"
    shutil.rmtree(package, ignore_errors=True)
    package.mkdir(parents=True)
    for entry in (ROOT / "core").iterdir():
        if entry.name == "api.py" and api_text is not None:
            (package / entry.name).write_text(api_text)
        elif entry.name != "__pycache__":
            try:
                (package / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
            except OSError as exc:   # Windows without the symlink privilege
                pytest.skip(f"cannot make the symlinks mypy needs to see core/ as convsolve: {exc}")
    env = dict(os.environ, MYPYPATH=str(place / "path"))
    return subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(place / "cache")],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=240,
                          check=False)


def _configured_modules():
    """The modules [tool.mypy] names, which a bare `mypy` checks."""
    try:
        import tomllib
    except ImportError:   # Python 3.10: mypy brings tomli
        import tomli as tomllib
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["modules"]


def test_mypy_finds_nothing(place):
    """mypy over the configured modules (the public API's and the contract's) reports no error,
    having checked every one of them."""
    done = _mypy(place)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    checked = f"Success: no issues found in {len(_configured_modules())} source files"
    assert done.stdout.strip().splitlines()[-1] == checked, done.stdout


def test_mypy_sees_planted_errors(place):
    """The same command fails on planted errors, each named at its line: wrong calls of typed
    public functions (numpy API, find, a Handle method), a Problem's key used as an int, and a
    function left untyped in a module that must be typed whole; so a pass means clean."""
    source = (ROOT / "core" / "api.py").read_text()
    assert source.count(_UNTYPED[0]) == 1, f"plant the untyped def elsewhere: {_UNTYPED[0]!r}"
    untyped_line = source[:source.index(_UNTYPED[0])].count("\n") + 1
    source = source.replace(*_UNTYPED).rstrip("\n") + "\n"
    first = source.count("\n") + 1
    source += "".join(f"{text}\n" for text, _ in _PLANTED)
    done = _mypy(place, source)
    found = {(Path(m["path"]).name, int(m["line"]), m["code"])
             for m in _ERROR.finditer(done.stdout)}
    expected = {("api.py", untyped_line, "no-untyped-def")} | {
        ("api.py", first + i, code) for i, (_, code) in enumerate(_PLANTED)}
    assert done.returncode == 1 and found == expected, done.stdout[-6000:] + done.stderr[-2000:]
