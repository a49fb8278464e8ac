"""Test-only tunable solvers for check_solver: one whose config WG=16 is wrong (check_solver must
name it), one whose default config is outside its space."""
import pyopencl as cl
from convsolve import ConfigSpace, hookimpl, round_up
from cs_fake import NAIVE, FakeSolver

CONVSOLVE_SOLVER_API = ">=2.1,<3"


class Tiled(FakeSolver):
    """The naive kernel in work-groups of WG; with WG=16 the range is rounded down, so odd sizes
    lose their tail; check_config refuses WG=8 (it must then never be built)."""

    name = "configs.Tiled"
    family = "configs"
    dynamic = True

    def __init__(self):
        self.built = []   # the configs build_invoker was called with
        self.ran = []     # the config of each run of an invoker

    @hookimpl
    def config_space(self, problem):
        return ConfigSpace({"WG": (8, 16, 32, 64)})

    @hookimpl
    def default_config(self, problem, handle):
        return {"WG": 64}

    @hookimpl
    def check_config(self, problem, handle, config):
        return ["planted refusal"] if config["WG"] == 8 else []

    @hookimpl
    def build_invoker(self, problem, handle, config):
        self.built.append(config)
        kernel = handle.build(NAIVE, "naive_fwd")
        wg = config["WG"]
        size = (problem.y.size // wg * wg if wg == 16 else round_up(problem.y.size, wg),)

        def invoker(buffers, scratch):
            self.ran.append(config)
            if not size[0]:
                return [cl.enqueue_marker(handle.queue)]
            kernel.set_args(buffers.x, buffers.w, buffers.y, *problem.kernel_args())
            return [cl.enqueue_nd_range_kernel(handle.queue, kernel, size, (wg,))]
        return invoker


class BadDefault(Tiled):
    name = "configs.BadDefault"

    @hookimpl
    def default_config(self, problem, handle):
        return {"WG": 48}


@hookimpl
def convsolve_solvers():
    return [Tiled(), BadDefault()]
