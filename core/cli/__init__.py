"""The ``convsolve`` command: its subcommands and MIOpenDriver's command line."""


def main(argv=None):
    """The ``convsolve`` command (cli/commands.py), imported when called so that
    ``python -m convsolve.cli.docgen`` and the other modules run without loading every command."""
    from .commands import main as run_command
    return run_command(argv)


__all__ = ["main"]
