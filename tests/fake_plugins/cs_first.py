"""Test-only plugin: the naive solvers of every spatial rank declaring channels-first layouts
only, so that composite layout candidates of 1-D and 3-D problems have solvers to wrap."""
from convsolve import LAYOUTS, hookimpl
from convsolve_direct.naive import NaiveBwdData, NaiveBwdWeights, NaiveFwd

CONVSOLVE_SOLVER_API = ">=2.5,<3"   # spatial_dims and layouts (2.5)
CHANNELS_FIRST = tuple(pair[0] for pair in LAYOUTS.values())


def _first_only(base, name):
    return type(name, (base,), {"name": f"first.{name}", "layouts": CHANNELS_FIRST})()


@hookimpl
def convsolve_solvers():
    return [_first_only(NaiveFwd, "Fwd"), _first_only(NaiveBwdData, "BwdData"),
            _first_only(NaiveBwdWeights, "BwdWeights")]
