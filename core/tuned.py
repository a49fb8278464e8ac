"""Which config a tunable solver builds: the perf-db's tuned one for the device and problem, else
the solver's default for the device class."""
import logging

from .calls import config_refusal, default_config_of, is_tunable
from .perf_db import PerfDb

log = logging.getLogger("convsolve")


def config_for(solver, problem, handle):
    """The config ``solver`` builds for ``problem`` on ``handle``: None for a solver that is not
    tunable; the perf-db's fastest valid config; else ``default_config``'s (ContractError when
    that is invalid)."""
    if not is_tunable(solver):
        return None
    trial = PerfDb().tuned(handle.db_key, problem.key(), solver.name)
    if trial is not None:
        reason = config_refusal(solver, problem, handle, trial.config)
        if reason is None:
            return trial.config
        log.warning("perf-db config %s of %r for %s no longer valid (%s); using the default",
                    trial.config, solver.name, problem.key(), reason)
    return default_config_of(solver, problem, handle)


def invoker(handle, solver, problem):
    """``handle.invoker`` for the config ``solver`` builds now (config_for)."""
    return handle.invoker(solver, problem, config_for(solver, problem, handle))
