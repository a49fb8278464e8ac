"""The ``convsolve`` command: its subcommands and MIOpenDriver's command line."""
from .commands import main

__all__ = ["main"]
