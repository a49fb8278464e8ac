"""Test-only plugin: packing.Counted, the naive forward solver with a build_packing hook whose
pack is a copy of w (a kernel-free stand-in for a filter transform) and that counts its packs
and its runs from packed weights, so tests see when the core packs and what find times."""
import collections

import pyopencl as cl
from convsolve import Packing, hookimpl
from convsolve_direct.naive import NaiveFwd

CONVSOLVE_SOLVER_API = ">=2.4,<3"   # build_packing (2.4)

#: Calls by kind: "pack", "packed" (runs from packed weights), "plain" (build_invoker's).
CALLS = collections.Counter()


class Counted(NaiveFwd):
    name = "packing.Counted"
    family = "packing"

    @hookimpl
    def build_invoker(self, problem, handle, config):
        run = super().build_invoker(problem, handle, config)

        def invoker(buffers, scratch):
            CALLS["plain"] += 1
            return run(buffers, scratch)
        return invoker

    @hookimpl
    def build_packing(self, problem, handle, config):
        run = super().build_invoker(problem, handle, config)

        def pack(w, packed):
            CALLS["pack"] += 1
            return [cl.enqueue_copy(handle.queue, packed, w, byte_count=problem.w.nbytes)]

        def invoker(buffers, scratch, packed):
            CALLS["packed"] += 1
            return run(buffers._replace(w=packed), scratch)
        return Packing(problem.w.nbytes, pack, invoker)


@hookimpl
def convsolve_solvers():
    return [Counted()]
