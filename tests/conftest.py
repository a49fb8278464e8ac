"""Core-test set-up: only the naive reference solvers (and named test plugins) load; fakes are
importable."""
import os
from pathlib import Path

import pytest

FAKE_PLUGINS = Path(__file__).parent / "fake_plugins"


@pytest.fixture(autouse=True)
def fake_plugins_importable(monkeypatch):
    """Put tests/fake_plugins on sys.path and PYTHONPATH, so CONVSOLVE_PLUGINS can name its
    modules in this process and in the processes it starts."""
    monkeypatch.syspath_prepend(str(FAKE_PLUGINS))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        filter(None, [str(FAKE_PLUGINS), os.environ.get("PYTHONPATH")])))


@pytest.fixture(autouse=True)
def only_naive_solvers(convsolve_isolated, monkeypatch):
    """Core tests see the direct family's naive solvers alone (fake_plugins/cs_naive.py, autoload
    off), whatever else is installed or the direct family grows; a test adds its fakes with
    CONVSOLVE_PLUGINS='cs_naive,cs_fake'."""
    monkeypatch.setenv("CONVSOLVE_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive")
