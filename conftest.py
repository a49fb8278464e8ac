"""Top-level conftest: every test directory (tests/ and plugins/*/tests/) uses convsolve.testing."""
pytest_plugins = ["convsolve.testing"]
