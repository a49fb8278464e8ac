"""The reference: compute_at gives compute()'s values, non-finite ones included, at any index."""
import numpy as np
import pytest
from convsolve import reference
from convsolve.testing import random_tensors, standard_problems


@pytest.mark.parametrize("problem", standard_problems(), ids=lambda p: p.key())
def test_elements_equal_the_whole_reference(problem):
    """Every element computed on its own equals the whole-tensor reference, with an inf and a
    NaN planted in the inputs too."""
    host = random_tensors(problem, 1)
    index = np.arange(getattr(problem, problem.direction.output).size)
    for planted in (False, True):
        if planted:
            host["w"].flat[0], host["x"].flat[0], host["y"].flat[-1] = np.inf, np.inf, np.nan
        with np.errstate(invalid="ignore"):
            whole = reference.compute(problem, **host).ravel()
            elements = reference.compute_at(problem, host["x"], host["w"], host["y"], index)
        assert np.array_equal(np.isnan(elements), np.isnan(whole))
        assert np.array_equal(np.isinf(elements), np.isinf(whole))
        finite = np.isfinite(whole)
        assert np.allclose(elements[finite], whole[finite], rtol=1e-12, atol=1e-12)
