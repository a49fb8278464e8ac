"""Test-only plugin whose solvers each break the contract one way; plus one valid solver."""
from convsolve import Direction, hookimpl

CONVSOLVE_SOLVER_API = ">=2.0,<3"


class Base:
    family = "contract"
    directions = (Direction.FORWARD,)
    dynamic = True

    @hookimpl
    def is_applicable(self, problem):
        return True

    @hookimpl
    def get_wti(self, problem):
        return 0.1

    @hookimpl
    def workspace(self, problem):
        return 0

    @hookimpl
    def build_invoker(self, problem, handle):
        return lambda buffers, scratch: []


class Valid(Base):
    name = "contract.Valid"


class Misspelt(Base):
    name = "contract.Misspelt"

    @hookimpl
    def is_aplicable(self, problem):
        return True


class WrongArgument(Base):
    name = "contract.WrongArgument"

    @hookimpl
    def workspace(self, prob):
        return 0


class MissingHook(Base):
    name = "contract.MissingHook"
    build_invoker = None


class BadName(Base):
    name = "NoFamilyPrefix"


class UnknownRank(Base):
    name = "contract.UnknownRank"
    spatial_dims = (2, 4)


class UnknownLayout(Base):
    name = "contract.UnknownLayout"
    layouts = ("NCHW", "CHWN")


class RanksInAList(Base):
    name = "contract.RanksInAList"
    spatial_dims = [1, 2]   # noqa: RUF012 - a list where a tuple is due is the fault planted


@hookimpl
def convsolve_solvers():
    return [Valid(), Misspelt(), WrongArgument(), MissingHook(), BadName(), UnknownRank(),
            UnknownLayout(), RanksInAList()]
