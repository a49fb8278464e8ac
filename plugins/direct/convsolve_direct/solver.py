"""What the direct solvers share: the family, dynamic builds, float32 problems, and the whole
epilogue stored by the kernel that writes each output element once."""
from convsolve import hookimpl


class DirectSolver:
    """A direct solver: every size is a kernel argument (dynamic), and a solver whose kernel
    computes each output element in one work-item stores its whole epilogue there.  A solver
    subclasses it, setting ``name`` and ``directions``, and defines its other hooks (its
    applicability and fusion where they differ: depthwise problems, a reduction in chunks)."""

    family = "direct"
    dynamic = True

    @hookimpl
    def is_applicable(self, problem):
        return problem.dtype == "float32"

    @hookimpl
    def fused_stages(self, problem):
        """All of it: one work-item stores each output element once."""
        return len(problem.epilogue.stages)
