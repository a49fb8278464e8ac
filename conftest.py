"""Top-level conftest: every test directory (tests/ and plugins/*/tests/) uses convsolve.testing;
the Oclgrind tests, each a few long runs in a child process, go first, so that under
pytest-xdist they overlap the rest instead of trailing it."""
pytest_plugins = ["convsolve.testing"]


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: item.get_closest_marker("sanitized") is None)
