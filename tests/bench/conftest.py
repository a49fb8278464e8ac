"""Bench-test set-up: an empty find-db and kernel cache, and `convsolve bench` run in-process."""
import argparse

import pytest
from convsolve.bench.command import add_parser


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    """Empty find-db and kernel cache in a temporary directory."""
    monkeypatch.setenv("CONVSOLVE_USER_DB_PATH", str(tmp_path / "db.sqlite"))
    monkeypatch.setenv("CONVSOLVE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CONVSOLVE_SYSTEM_DB_PATH", str(tmp_path / "none.jsonl"))
    return tmp_path


@pytest.fixture
def bench_main():
    """A function that parses ``argv`` as `convsolve bench` (only that subcommand) and runs it."""
    def main(argv):
        parser = argparse.ArgumentParser(prog="convsolve")
        add_parser(parser.add_subparsers(dest="command", required=True))
        args = parser.parse_args(["bench", *argv])
        return args.func(args)
    return main
