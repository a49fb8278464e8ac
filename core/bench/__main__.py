"""`python -m convsolve.bench ...`: the bench subcommand on its own."""
import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
