"""Benchmarking for `convsolve bench`: the command, peak, torch peer, find overhead, reports."""
import argparse
import sys

from ..errors import ConvsolveError


def main(argv=None):
    """``python -m convsolve.bench ...``: the bench subcommand on its own."""
    # Imported here, not above: the workers (`python -m convsolve.bench.torch_peer`, `.overhead`)
    # import this package first and must not be imported through it before they run.
    from .command import add_parser
    parser = argparse.ArgumentParser(prog="convsolve")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["bench", *(sys.argv[1:] if argv is None else argv)])
    try:
        return args.func(args)
    except ConvsolveError as exc:
        print(f"convsolve: error: {exc}", file=sys.stderr)
        return 1
