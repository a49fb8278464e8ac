"""The hooks the three implicit GEMM solvers share: applicability, WTI, workspace, the fused
epilogue, the tunable hooks, and the invoker plan.py builds."""
import math

from convsolve import ALL_LAYOUTS, hookimpl

from . import configs, plan

INT32_MAX = 2 ** 31 - 1


def _window_fits_int32(problem):
    """Whether the kernels' window offsets (((depth * height + row) * width + column) times B's
    pixel stride, with depths, rows and columns anywhere in the padded input or in dy's border)
    stay inside an int."""
    reach = math.prod(max(size, out) + lo + hi + fil * dil for size, fil, out, (lo, hi), _, dil
                      in plan.lifted(problem))
    return 2 * reach * plan.b_pixel(problem) + max(problem.x.size, problem.y.size) <= INT32_MAX


class ImplicitGemm:
    """A convolution as an implicit GEMM (kernels/implicit_gemm_common.cl): nothing unfolded in
    memory. A solver subclasses it, setting ``name`` and ``directions`` (one direction each)."""

    family = "implicit_gemm"
    dynamic = True
    spatial_dims = (1, 2, 3)
    #: x, w and y each channels-first or channels-last (implicit_gemm_common.cl's strides)
    layouts = ALL_LAYOUTS

    @hookimpl
    def is_applicable(self, problem):
        return (problem.dtype == "float32" and _window_fits_int32(problem)
                and plan.workspace(problem) // 4 <= INT32_MAX)

    @hookimpl
    def get_wti(self, problem):
        return plan.wti(problem)

    @hookimpl
    def workspace(self, problem, handle):
        return plan.workspace(problem, handle.device)

    @hookimpl
    def fused_stages(self, problem):
        """All of it, in every direction: the kernel that writes the output (the GEMM, or the
        sum of its splits) stores each element once."""
        return len(problem.epilogue.stages)

    @hookimpl
    def config_space(self, problem):
        return configs.space()

    @hookimpl
    def default_config(self, problem, handle):
        return configs.default(problem, handle.device)

    @hookimpl
    def check_config(self, problem, handle, config):
        return configs.refusals(problem, config, handle.device)

    @hookimpl
    def build_invoker(self, problem, handle, config):
        return plan.build(problem, handle, config or configs.default(problem, handle.device))
