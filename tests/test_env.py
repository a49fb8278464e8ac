"""Environment variables: parsing, and docs/environment.md listing every one of them."""
from pathlib import Path

import pytest
from convsolve import ValidationError, env
from convsolve.cli import docgen

DOCS = Path(__file__).resolve().parents[1] / "docs" / "environment.md"


def test_every_variable_is_documented():
    """docs/environment.md holds the table generated from env.py (`convsolve env --markdown`)."""
    assert docgen.env_markdown() in DOCS.read_text()


@pytest.mark.parametrize("value, expected", [("2G", 2 << 30), ("512M", 512 << 20),
                                             ("64k", 64 << 10), ("100", 100), ("1GB", 1 << 30)])
def test_sizes(monkeypatch, value, expected):
    """Byte sizes take K, M and G suffixes."""
    monkeypatch.setenv("CONVSOLVE_WORKSPACE_LIMIT", value)
    assert env.size_in_bytes(env.WORKSPACE_LIMIT) == expected


def test_bad_values_name_the_variable(monkeypatch):
    """Unparseable values raise ValidationError naming the variable."""
    monkeypatch.setenv("CONVSOLVE_WORKSPACE_LIMIT", "lots")
    with pytest.raises(ValidationError, match="CONVSOLVE_WORKSPACE_LIMIT"):
        env.size_in_bytes(env.WORKSPACE_LIMIT)
    monkeypatch.setenv("CONVSOLVE_COMPILE_PARALLEL_LEVEL", "0")
    with pytest.raises(ValidationError, match="CONVSOLVE_COMPILE_PARALLEL_LEVEL"):
        env.integer(env.COMPILE_PARALLEL_LEVEL, minimum=1)


def test_names_are_stripped_lists(monkeypatch):
    """Comma lists drop blanks and surrounding spaces."""
    monkeypatch.setenv("CONVSOLVE_PLUGINS", " a, ,b ,")
    assert env.names(env.PLUGINS) == ["a", "b"]
