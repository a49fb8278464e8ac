"""`convsolve explain`: for one problem, what became of every installed solver and why."""
from .. import env
from ..db.find_db import FindDb
from ..engine import fusion
from ..engine.find import FindMode, _dynamic_only, benchmark
from ..engine.run import check_buffers
from ..errors import ContractError
from ..solvers.calls import workspace_of, wti_of
from ..solvers.policy import Policy
from ..solvers.registry import registry
from ..text import format_bytes, table


def _safe(call, solver, *args):
    """``call(solver, *args)``, or None when the solver breaks the contract there."""
    try:
        return call(solver, *args)
    except ContractError:
        return None


def explain(handle, problem, buffers=None):
    """One dict per installed solver: its fate for ``problem``, WTI, workspace and db record.

    ``status`` is ``'rank N'`` for the solvers that work, else the reason it was dropped:
    disabled (and by which switch; a family switched off is one row, ``<plugin>.*``, its plugin
    not imported), numerical policy (CONVSOLVE_MAX_TOLERANCE, CONVSOLVE_DETERMINISTIC,
    CONVSOLVE_ALLOW_REDUCED_PRECISION), direction, not applicable, workspace, failed build (with
    the log's first lines) or failed run.  A solver that find in DYNAMIC_HYBRID mode (the
    default) would not benchmark says so on a second line.  With ``buffers`` (forward-sense device
    buffers) the applicable solvers are built and timed as find would, without recording
    anything; without them, only what needs no device is reported.  For a problem with an
    epilogue, the rows are find's candidates (a fusing solver's ``<name>/unfused`` too) and the
    solvers left out; ``buffers`` then also holds the epilogue's values as find takes them.
    A problem with a channels-last tensor gets a row for each composite layout candidate
    (``<name>/nchw``, engine/layouts.py), a 1-D problem one for each rank candidate
    (``<name>/2d``, engine/ranks.py), after its solver's, whose status names it; the
    candidate's second line says what it runs (with an epilogue too: its unfused candidate).
    """
    reg, policy = registry(), Policy.resolve()
    applicable, skipped = fusion.candidates(problem, policy, handle.device.name)
    records = {r.solver: r for r in FindDb().records(handle.db_key, policy.db_key(problem))}
    timed = {}
    if buffers is not None:
        checked = check_buffers(problem, *(buffers[name] for name in "xwy"))
        checked = checked.with_epilogue_args(fusion.epilogue_args(problem, checked, handle, **{
            name: value for name, value in buffers.items() if name not in "xwy"}))
        with handle.timing_section() as timing:
            results = benchmark(timing, problem, applicable, fusion.bench_buffers(
                timing, problem, checked), None, skipped)
        timed = {r.solver: (rank, r) for rank, r in enumerate(results, 1)}
    unbenchmarked = {}   # what find's default mode leaves out, and why
    if FindMode.parse() is FindMode.DYNAMIC_HYBRID:
        _dynamic_only(problem, applicable, unbenchmarked)
    rows = [{"solver": name, "family": name[:-2], "wti": None, "workspace": None,
             "db_time_ms": None, "db_source": None, "time_ms": None, "status": why}
            for name, why in skipped.items() if name.endswith(".*")]   # plugins not imported
    shown = [*applicable, *(s for s in reg.solvers.values() if s.name in skipped)]
    if problem.epilogue is None:   # each solver, then its composite or rank candidate if any
        composite = {c.inner.name: c for c in applicable if c.name not in reg.solvers}
        shown = [s for solver in reg.solvers.values()
                 for s in (solver, composite.get(solver.name)) if s is not None]
    for solver in shown:
        record = records.get(solver.name)
        usable = solver in applicable
        row = {"solver": solver.name, "family": solver.family,
               "wti": _safe(wti_of, solver, problem) if usable else None,
               "workspace": _safe(workspace_of, solver, problem, handle) if usable else None,
               "db_time_ms": record.time_ms if record else None,
               "db_source": record.source if record else None,
               "time_ms": timed[solver.name][1].time_ms if solver.name in timed else None}
        if solver.name in skipped:
            row["status"] = "\n".join(str(skipped[solver.name]).splitlines()[:4])
        else:
            row["status"] = (f"rank {timed[solver.name][0]}" if solver.name in timed
                             else "applicable (not run)")
            wrapped = getattr(solver, "solver", solver)   # an epilogue candidate's own
            if hasattr(wrapped, "describe"):   # a composite or rank candidate says what it runs
                row["status"] += "\n" + wrapped.describe(problem)
            if solver.name in unbenchmarked:
                row["status"] += (f"\nfind skips it: {unbenchmarked[solver.name]}; "
                                  f"{env.FIND_MODE.name}=HYBRID or -s 1 runs it")
        rows.append(row)
    return rows


def explain_text(rows):
    """explain()'s rows as the command prints them: a table, then the further lines of each
    status."""
    cells = [(row["solver"], row["family"], "-" if row["wti"] is None else f"{row['wti']:.3g}",
              "-" if row["workspace"] is None else format_bytes(row["workspace"]),
              "-" if row["time_ms"] is None else f"{row['time_ms']:.4f}",
              "-" if row["db_time_ms"] is None else
              f"{row['db_time_ms']:.4f} ms ({row['db_source']} db)",
              row["status"].splitlines()[0]) for row in rows]
    headers = ("solver", "family", "WTI", "workspace", "time (ms)", "find-db record", "status")
    return "\n".join([table(cells, headers, left={"solver", "family", "status"}), *(
        f"    {row['solver']}: {line}" for row in rows for line in row["status"].splitlines()[1:])])
