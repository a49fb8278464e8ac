"""The transform matrices: derived exactly, identities checked in numpy, committed file current."""
import importlib.util
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

TOOL = Path(__file__).resolve().parents[1] / "tools" / "gen_transforms.py"
_spec = importlib.util.spec_from_file_location("gen_transforms", TOOL)
gen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen)

SIZES = sorted(gen.POINTS)


def _float(mat):
    return np.array([[float(v) for v in row] for row in mat], np.float64)


def test_committed_file_is_what_the_generator_writes():
    """kernels/winograd_transforms.cl holds exactly the generator's output (rerun the tool)."""
    assert gen.OUT.read_text() == gen.generate()


@pytest.mark.parametrize("m", SIZES)
def test_one_dimensional_identity_is_exact(m):
    """A^T [(G g) * (B^T d)] is the correlation of d with g, in exact rational arithmetic."""
    assert gen.correlate_check(m) == 0
    at, g, bt = gen.matrices(m)
    assert (len(at), len(at[0]), len(g), len(g[0]), len(bt)) == (m, m + 2, m + 2, 3, m + 2)
    assert all(v.denominator == 1 for row in bt for v in row)   # fractions sit in G


@pytest.mark.parametrize("m", SIZES)
def test_emitted_code_computes_the_matrices(m):
    """Every generated function, read back as a linear map, is its matrix (zero terms dropped,
    even and odd halves shared)."""
    at, g, bt = gen.matrices(m)
    for matrix, by_columns in ((bt, False), (g, False), (at, True),
                               ([list(c) for c in zip(*at)], False),
                               ([list(c) for c in zip(*g)], True)):
        steps = gen.program(matrix, by_columns)
        assert gen.evaluate(steps, len(matrix[0])) == [[Fraction(v) for v in row]
                                                       for row in matrix]


def _correlate2d(d, g):
    """Valid 2-D correlation of d (..., a, a) with g (..., 3, 3)."""
    out = d.shape[-1] - 2
    return sum(d[..., i:i + out, j:j + out] * g[..., i:i + 1, j:j + 1]
               for i in range(3) for j in range(3))


@pytest.mark.parametrize("m", SIZES)
def test_two_dimensional_forward_and_weight_gradient(m):
    """In float64: Y = A^T [(G g G^T) * (B^T d B)] A is the tile's correlation, and
    G^T [(A e A^T) * (B^T d B)] G its weight gradient sum_ij e[i][j] d[i + r][j + s]."""
    at, g, bt = (_float(x) for x in gen.matrices(m))
    rng = np.random.default_rng(m)
    d = rng.uniform(-1, 1, (50, m + 2, m + 2))
    f = rng.uniform(-1, 1, (50, 3, 3))
    e = rng.uniform(-1, 1, (50, m, m))
    y = at @ ((g @ f @ g.T) * (bt @ d @ bt.T)) @ at.T
    assert np.abs(y - _correlate2d(d, f)).max() < 1e-12
    dw = g.T @ ((at.T @ e @ at) * (bt @ d @ bt.T)) @ g
    direct = np.stack([np.einsum("tij,tij->t", e, d[:, r:r + m, s:s + m])
                       for r in range(3) for s in range(3)], -1).reshape(-1, 3, 3)
    assert np.abs(dw - direct).max() < 1e-12


def test_chosen_points_are_the_most_accurate_of_the_candidates():
    """The float32 error of each chosen point set is the lowest among the tool's candidates
    (a small sample: README.md has the full comparison)."""
    for m, candidates in gen.CANDIDATES.items():
        chosen = gen.float32_error(m, gen.POINTS[m], channels=16, tiles=200)
        assert all(chosen <= 1.05 * gen.float32_error(m, points, channels=16, tiles=200)
                   for points in candidates[:2]), m
