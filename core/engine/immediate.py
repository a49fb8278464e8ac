"""Immediate mode: solutions from the find-db or the WTI fallback, then compile and run by name."""
from ..device.handle import Handle
from ..problem import Problem
from ..solvers.calls import workspace_of
from ..solvers.policy import Policy
from .plan import run
from .run import check_handle, check_problem, resolve_solver
from .search import tuned_invoker
from .solutions import Solution, ranked_without_benchmark


def get_solutions(handle: Handle, problem: Problem, max_count: int | None = None) -> list[Solution]:
    """Ranked solutions for ``problem`` without benchmarking.

    From the find-db when it has usable records (``source == 'find-db'``), else from the learned
    ranking for the device (``source == 'predicted'``; docs/heuristics.md), else, where no model
    applies, the fallback that ranks applicable solvers by WTI, time = 10 / WTI ms
    (``source == 'fallback'``).  For a problem with an epilogue, the candidates are find's: each
    solver fused as far as it says, and a fusing solver's ``<name>/unfused`` variant.
    """
    check_handle(handle)
    solutions = ranked_without_benchmark(handle, check_problem(problem), Policy.resolve())
    return solutions[:max_count]


def get_solution_count(handle: Handle, problem: Problem) -> int:
    """How many solutions get_solutions would return with no limit."""
    return len(get_solutions(handle, problem))


def get_solution_workspace_size(handle: Handle, problem: Problem, solver: str) -> int:
    """Bytes of workspace the named solver needs for ``problem``."""
    return workspace_of(resolve_solver(handle, problem, solver), problem, handle)


def compile_solution(handle: Handle, problem: Problem, solver: str) -> None:
    """Build the named solver for ``problem`` now, so the first run_solution does not compile."""
    tuned_invoker(handle, resolve_solver(handle, problem, solver), problem)


#: Run a solution by solver name: the same function as :func:`convsolve.run`.
run_solution = run
