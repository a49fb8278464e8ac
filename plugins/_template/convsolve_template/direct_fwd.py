"""template.DirectFwd: forward direct convolution, compiled per problem, TILE_K channels per work-item."""
from convsolve import Direction, hookimpl

from . import plan


class DirectFwd:
    name = "template.DirectFwd"   # family.Name: stored in find-dbs, never rename it
    family = "direct"   # CONVSOLVE_DEBUG_CONV_<FAMILY>=0 turns the family off
    directions = (Direction.FORWARD,)
    dynamic = False   # sizes are compiled in: one build per problem

    @hookimpl
    def is_applicable(self, problem):   # any stride, padding, dilation and groups
        return problem.dtype == "float32"

    @hookimpl
    def get_wti(self, problem):
        return 0.02   # estimated fraction of the device's peak; < 0 if unknown

    @hookimpl
    def workspace(self, problem):
        return 0   # exact bytes of scratch memory

    @hookimpl
    def build_invoker(self, problem, handle):
        return plan.build(problem, handle)   # the kernels and launches: plan.py
