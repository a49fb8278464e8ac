"""The plugin's tests use convsolve's shared fixtures and check_solver."""
pytest_plugins = ["convsolve.testing"]
