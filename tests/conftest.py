"""Core-test helpers: the test-only plugins in tests/fake_plugins are importable by module name."""
from pathlib import Path

import pytest

FAKE_PLUGINS = Path(__file__).parent / "fake_plugins"


@pytest.fixture(autouse=True)
def fake_plugins_importable(monkeypatch):
    """Put tests/fake_plugins on sys.path, so CONVSOLVE_PLUGINS can name its modules."""
    monkeypatch.syspath_prepend(str(FAKE_PLUGINS))
