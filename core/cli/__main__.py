"""``python -m convsolve.cli ...``: the ``convsolve`` command."""
import sys

from .commands import main

sys.exit(main())
