"""The test suite's own knobs: environment variables that only this repository's tests read.

They are not the library's (core/env.py declares those, and docs/environment.md lists them); each
is a ``convsolve.env.Var``, read when the test module loads.

- ``CONVSOLVE_STRESS_PROCESSES`` (8), ``CONVSOLVE_STRESS_ROUNDS`` (2),
  ``CONVSOLVE_STRESS_RECORDS`` (6), ``CONVSOLVE_STRESS_SEED`` (0 draws one): tests/test_concurrency.py's
  writer processes per round, rounds (each killing some writers), records per thread and round,
  and the seed that replays a run.
- ``CONVSOLVE_FUZZ_EXAMPLES`` (0 keeps each test's CI count), ``CONVSOLVE_FUZZ_PLUGINS``
  (``direct``): tests/test_fuzz.py's hypothesis examples per test and the plugins it fuzzes.
"""
from convsolve.env import Var

STRESS_PROCESSES = Var("CONVSOLVE_STRESS_PROCESSES", "8", "writer processes per round")
STRESS_ROUNDS = Var("CONVSOLVE_STRESS_ROUNDS", "2", "rounds, each killing some writers")
STRESS_RECORDS = Var("CONVSOLVE_STRESS_RECORDS", "6", "records per thread and round")
STRESS_SEED = Var("CONVSOLVE_STRESS_SEED", "0", "seed to replay a run; 0 draws one")
FUZZ_EXAMPLES = Var("CONVSOLVE_FUZZ_EXAMPLES", "0", "hypothesis examples per test; 0: CI's")
FUZZ_PLUGINS = Var("CONVSOLVE_FUZZ_PLUGINS", "direct", "comma list of plugins to fuzz")
