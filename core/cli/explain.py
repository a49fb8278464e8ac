"""`convsolve explain`: for one problem, what became of every installed solver and why."""
from ..db.find_db import FindDb
from ..engine import fusion
from ..engine.find import benchmark
from ..engine.run import check_buffers
from ..errors import ContractError
from ..solvers.calls import workspace_of, wti_of
from ..solvers.policy import Policy
from ..solvers.registry import registry


def _safe(call, solver, problem):
    """``call(solver, problem)``, or None when the solver breaks the contract there."""
    try:
        return call(solver, problem)
    except ContractError:
        return None


def explain(handle, problem, buffers=None):
    """One dict per installed solver: its fate for ``problem``, WTI, workspace and db record.

    ``status`` is ``'rank N'`` for the solvers that work, else the reason it was dropped:
    disabled (and by which switch), numerical policy (CONVSOLVE_MAX_TOLERANCE,
    CONVSOLVE_DETERMINISTIC, CONVSOLVE_ALLOW_REDUCED_PRECISION), direction, not applicable, workspace, failed
    build (with the log's first lines) or failed run.  With ``buffers`` (forward-sense device
    buffers) the applicable solvers are built and timed as find would, without recording
    anything; without them, only what needs no device is reported.  For a problem with an
    epilogue, the rows are find's candidates (a fusing solver's ``<name>/unfused`` too) and the
    solvers left out; ``buffers`` then also holds the epilogue's values as find takes them.
    """
    reg, policy = registry(), Policy.resolve()
    applicable, skipped = fusion.candidates(problem, policy)
    records = {r.solver: r for r in FindDb().records(handle.db_key, policy.db_key(problem))}
    timed = {}
    if buffers is not None:
        checked = check_buffers(problem, *(buffers[name] for name in "xwy"))
        checked = checked.with_epilogue(fusion.values(problem, checked, handle, **{
            name: value for name, value in buffers.items() if name not in "xwy"}))
        results = benchmark(handle, problem, applicable, fusion.bench_buffers(
            handle, problem, checked), None, skipped)
        timed = {r.solver: (rank, r) for rank, r in enumerate(results, 1)}
    rows = []
    shown = reg.solvers.values() if problem.epilogue is None else [*applicable, *(
        s for s in reg.solvers.values() if s.name in skipped)]
    for solver in shown:
        record = records.get(solver.name)
        usable = solver in applicable
        row = {"solver": solver.name, "family": solver.family,
               "wti": _safe(wti_of, solver, problem) if usable else None,
               "workspace": _safe(workspace_of, solver, problem) if usable else None,
               "db_time_ms": record.time_ms if record else None,
               "db_source": record.source if record else None,
               "time_ms": timed[solver.name][1].time_ms if solver.name in timed else None}
        if solver.name in timed:
            row["status"] = f"rank {timed[solver.name][0]}"
        elif solver.name in skipped:
            row["status"] = "\n".join(str(skipped[solver.name]).splitlines()[:4])
        else:
            row["status"] = "applicable (not run)"
        rows.append(row)
    return rows
