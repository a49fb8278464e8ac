"""The numerical policy of a call: which solvers its numerics admit.

As cuDNN's numerical notes let PyTorch exclude Winograd or non-deterministic algorithms, a call
(find, run by family, the numpy API) may ask for ``max_tolerance`` (solvers whose declared
``tolerance`` exceeds it are left out) and ``deterministic`` (solvers that declare
``deterministic = False`` are left out); CONVSOLVE_MAX_TOLERANCE and CONVSOLVE_DETERMINISTIC
set them for calls that do not.  Reduced precision (TF32) stays off unless
CONVSOLVE_ALLOW_REDUCED_PRECISION=1.  A policy that is set joins the find-db key, so that a
ranking made under one policy never answers another.
"""
import math
from dataclasses import dataclass

from .. import env
from ..errors import ValidationError
from ..hookspecs import solver_attribute


@dataclass(frozen=True)
class Policy:
    """Which solvers a call admits by their declared numerics (None / False: no constraint)."""

    max_tolerance: float | None = None
    deterministic: bool = False
    reduced_precision: bool = False

    @classmethod
    def resolve(cls, max_tolerance=None, deterministic=None):
        """The call's policy: its arguments, else CONVSOLVE_MAX_TOLERANCE and
        CONVSOLVE_DETERMINISTIC; reduced precision from CONVSOLVE_ALLOW_REDUCED_PRECISION."""
        if max_tolerance is None and env.MAX_TOLERANCE.raw():
            max_tolerance = env.positive_number(env.MAX_TOLERANCE)
        if max_tolerance is not None and (isinstance(max_tolerance, bool) or not isinstance(
                max_tolerance, (int, float)) or not 0 < max_tolerance < math.inf):
            raise ValidationError("max_tolerance", max_tolerance, "must be a number > 0 or None")
        if deterministic is None:
            deterministic = env.flag(env.DETERMINISTIC)
        if not isinstance(deterministic, bool):
            raise ValidationError("deterministic", deterministic, "must be True, False or None")
        return cls(None if max_tolerance is None else float(max_tolerance), deterministic,
                   env.flag(env.ALLOW_REDUCED_PRECISION))

    def refusal(self, solver):
        """Why the policy leaves ``solver`` out, or None."""
        if solver_attribute(solver, "reduced_precision") and not self.reduced_precision:
            return ("numerical policy: reduced precision is off "
                    f"({env.ALLOW_REDUCED_PRECISION.name}=0)")
        tolerance = solver_attribute(solver, "tolerance")
        if self.max_tolerance is not None and tolerance > self.max_tolerance:
            return (f"numerical policy: its tolerance {tolerance:g} exceeds max_tolerance "
                    f"{self.max_tolerance:g}")
        if self.deterministic and not solver_attribute(solver, "deterministic"):
            return "numerical policy: not deterministic (deterministic=True)"
        return None

    def db_key(self, problem):
        """The problem's find-db key under this policy: Problem.key(), with the policy's parts
        that are set appended (``-tol1e-05``, ``-det``)."""
        key = problem.key()
        if self.max_tolerance is not None:
            key += f"-tol{self.max_tolerance:g}"
        return key + ("-det" if self.deterministic else "")
