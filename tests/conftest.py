"""Core-test set-up: only the direct plugin (and named test plugins) load; fakes are importable."""
from pathlib import Path

import pytest

FAKE_PLUGINS = Path(__file__).parent / "fake_plugins"


@pytest.fixture(autouse=True)
def fake_plugins_importable(monkeypatch):
    """Put tests/fake_plugins on sys.path, so CONVSOLVE_PLUGINS can name its modules."""
    monkeypatch.syspath_prepend(str(FAKE_PLUGINS))


@pytest.fixture(autouse=True)
def only_direct_plugin(convsolve_isolated, monkeypatch):
    """Core tests see the direct plugin alone (autoload off), whatever else is installed; a test
    adds its fakes with CONVSOLVE_PLUGINS='direct,cs_fake'."""
    monkeypatch.setenv("CONVSOLVE_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "direct")
