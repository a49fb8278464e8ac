"""Rank candidates: a solver that serves 2-D problems only runs a 1-D problem as the 2-D problem
of height 1 with the same memory (``as_2d``): no copy, no extra kernel.

For a 1-D problem, each solver the registry refuses only for its spatial rank (``shape_refusal``)
that is applicable to ``as_2d(problem)`` yields ``<name>/2d``.  It answers the solver hooks by
asking its solver about the 2-D problem (the same buffers serve both), so find times, records
and ranks it beside the native 1-D paths: a 1-D problem runs as a 2-D one only where that
measured faster.  Its WTI is its solver's times RANK_WTI, so that the fallback ranking prefers a
native path.  Its config is the one its solver has for the 2-D problem (perf-db, else the
default), which an exhaustive find or `convsolve tune` of the 1-D problem searches
(``inner_problem``, search.tuning_groups).
"""
from ..hookspecs import Packing
from ..problem import LAYOUTS, ConvDesc, Problem, TensorDesc
from ..solvers.calls import fused_stages_of, workspace_of
from .wrapped import Wrapped, wrapped_candidates

#: The suffix of a rank candidate's name: its solver on the 2-D view of a 1-D problem.
AS_2D = "/2d"
#: A rank candidate's WTI is its solver's times this: its solver's WTI reads a 2-D problem and
#: overrates the height-1 view (on wav2vec2's layers direct.Tiled/2d and direct.Depthwise/2d,
#: WTI 0.41 and 0.54 at 0.9, took 8-25x gemm.Im2ColGemm's time; BENCHMARKS.md), so that the
#: fallback ranking prefers a native path unless the solver's WTI is far above it.
RANK_WTI = 0.5


def as_2d(problem):
    """A 1-D problem as the 2-D problem of height 1 with the same memory (NCW as NCHW, NWC as
    NHWC; stride, dilation 1 and no padding along the height), its epilogue kept; any other
    problem itself."""
    if problem.spatial_dims != 1:
        return problem
    x, w, y = (TensorDesc((t.shape[0], t.shape[1], 1, t.shape[2]), t.dtype,
                          LAYOUTS[2][LAYOUTS[1].index(t.layout)])
               for t in (problem.x, problem.w, problem.y))
    c = problem.conv
    conv = ConvDesc(((0, 0), *c.pads), (1, *c.strides), (1, *c.dilations), c.groups)
    return Problem(problem.direction, x, w, y, conv, problem.epilogue)


def rank_candidates(problem, skipped, policy=None, device=None):
    """The rank candidates of the 1-D ``problem`` (none for other ranks), given the reasons
    ``skipped`` of Registry.candidates; the reason of each solver that gets one then names it."""
    if problem.spatial_dims != 1:
        return []
    return wrapped_candidates(RankCandidate, problem, as_2d(problem), skipped, policy, device,
                              "runs it as a 2-D problem")


class RankCandidate(Wrapped):
    """``solver`` on a 1-D problem's 2-D view (as_2d); it answers the solver hooks as
    find, run and the epilogue candidates need them."""

    WTI_FACTOR, KIND = RANK_WTI, "rank candidate"

    def __init__(self, solver):
        super().__init__(solver, AS_2D)
        self.spatial_dims = (1,)

    def describe(self, problem):
        """What it runs, in explain's words."""
        return f"composite: {self.inner.name} on the 1-D problem as 2-D, height 1 (no copy)"

    def inner_problem(self, problem):
        return as_2d(problem)

    def workspace(self, problem, handle):
        return workspace_of(self.inner, as_2d(problem), handle)

    def fused_stages(self, problem):
        return fused_stages_of(self.inner, as_2d(problem))

    def build_invoker(self, problem, handle):
        return self.inner_invoker(problem, handle)

    def build_packing(self, problem, handle):
        """Its solver's packing of the 2-D problem (None where it has none)."""
        built = self.inner_packing(problem, handle)
        return None if built is None else Packing(built.nbytes, built.pack, built.invoker)
