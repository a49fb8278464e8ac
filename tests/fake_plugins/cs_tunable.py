
"""Test-only plugin: a tunable forward solver whose configs have known relative costs (SPIN
iterations of busy work after direct's naive kernel) and one planted wrong config (WRONG=1).

Each run records its config in LAST_RUN, so that tests can time it by a known cost instead of a
measured one (tests/engine/test_search.py's ``known_costs``): rankings then do not depend on
the load of the machine."""
from importlib import resources
from pathlib import Path
from typing import ClassVar

import pyopencl as cl
from convsolve import ConfigSpace, Direction, hookimpl, round_up

CONVSOLVE_SOLVER_API = ">=2.1,<3"

NAIVE = resources.files("convsolve_direct") / "kernels" / "naive.cl"
KERNELS = Path(__file__).parent / "tunable.cl"
#: Busy-work iterations per work-item: the configs' times rise with the value.
SPINS = (0, 30000, 100000, 300000)
#: The config of the latest run of any Spin invoker.
LAST_RUN = {}


class Spin:
    name = "tunable.Spin"
    family = "tunable"
    directions = (Direction.FORWARD,)
    dynamic = True
    default: ClassVar[dict] = {"SPIN": 100000, "WRONG": 0}

    @hookimpl
    def is_applicable(self, problem):
        return True

    @hookimpl
    def get_wti(self, problem):
        return 0.9   # ranked first, so that find times it first

    @hookimpl
    def workspace(self, problem):
        return 0

    @hookimpl
    def config_space(self, problem):
        return ConfigSpace({"SPIN": SPINS, "WRONG": (0, 1)})

    @hookimpl
    def default_config(self, problem, handle):
        return dict(self.default)

    @hookimpl
    def build_invoker(self, problem, handle, config):
        naive = handle.build(NAIVE, "naive_fwd")
        spin = handle.build(KERNELS, "spin", {"SPIN": config["SPIN"]})
        spoil = handle.build(KERNELS, "spoil") if config["WRONG"] else None
        size = (round_up(problem.y.size, 64),)

        def invoker(buffers, scratch):
            LAST_RUN["config"] = config
            naive.set_args(buffers.x, buffers.w, buffers.y, *problem.kernel_args())
            events = [cl.enqueue_nd_range_kernel(handle.queue, naive, size, (64,))]
            spin.set_args(buffers.y)
            events.append(cl.enqueue_nd_range_kernel(handle.queue, spin, (64,), None))
            if spoil is not None:
                spoil.set_args(buffers.y)
                events.append(cl.enqueue_nd_range_kernel(handle.queue, spoil, (1,), None))
            return events
        return invoker


@hookimpl
def convsolve_solvers():
    return [Spin()]
