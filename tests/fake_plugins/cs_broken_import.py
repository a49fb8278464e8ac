"""Test-only plugin that fails to import."""
raise ImportError("planted import failure")
