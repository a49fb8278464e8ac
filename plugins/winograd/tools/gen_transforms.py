#!/usr/bin/env python3
"""Derive the Winograd F(m x m, 3 x 3) transforms and write them to kernels/winograd_transforms.cl.

The matrices come from the Toom-Cook construction of Lavin & Gray (arXiv 1509.09308), in exact
rational arithmetic, for the interpolation points in POINTS (plus the point at infinity):

    Ae[j][i] = p_j^i (alpha x m), Ge[j][k] = p_j^k (alpha x 3), V[j][t] = p_j^t (alpha x alpha),
    the row of the point at infinity being the last unit vector in each.  The product of two
    polynomials evaluated at the points gives  conv(h, g) = V^-1 [(Ae h) * (Ge g)], so the
    correlation  y_i = sum_k d[i + k] g[k]  is  y = A^T [(G g) * (B^T d)]  with  A^T = Ae^T,
    G = Ge, B^T = V^-T.  Each row k of B^T is scaled to coprime integers and row k of G divided
    by the same factor (the fractions sit in G, as wincnn's default does).

Backward-weights uses the same matrices: differentiating  sum_i u_i y_i = sum_k (A u)_k (G g)_k
(B^T d)_k  by g gives  dW = G^T [(A dy) * (B^T x)]  (in 2-D, G^T [(A dy A^T) * (B^T x B)] G).

Each 1-D transform is emitted as an inline function  name(x, xs, o, os): o[i*os] = sum_j M[i][j]
x[j*xs], over the type WINO_T that the including kernel defines.  Zero coefficients are left out,
and where two rows (points +p, -p) differ only in the sign of their odd terms the even and odd
halves are computed once (the same for two columns of A^T and G^T).  The generated file is
committed; nothing is assembled at run time.

    python3 plugins/winograd/tools/gen_transforms.py           # write the .cl file
    python3 plugins/winograd/tools/gen_transforms.py --check   # exit 1 if the file is stale
    python3 plugins/winograd/tools/gen_transforms.py --points  # float32 error of point sets
"""
import argparse
import sys
from fractions import Fraction
from math import gcd, lcm
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parents[1] / "convsolve_winograd" / "kernels" / \
    "winograd_transforms.cl"
R = 3   # filter size
H = Fraction(1, 2)
#: Finite interpolation points per output tile size m (alpha - 1 = m + 1 of them); `--points`
#: compares these with other sets (README.md, "Transforms", has the table).
POINTS = {2: (0, 1, -1), 4: (0, 1, -1, 2, -H), 6: (0, 1, -1, 2, -2, H, -H)}
#: Candidate sets that `--points` measures besides POINTS.
CANDIDATES = {4: [(0, 1, -1, 2, -2), (0, 1, -1, H, -H), (0, 1, -1, H, -3), (0, 1, -1, 2, H)],
              6: [(0, 1, -1, 2, -2, H, -H * H), (0, 1, -1, 2, -2, 3, H),
                  (0, 1, -1, H, -H, 2, -Fraction(1, 4)), (0, 1, -1, 2, -2, Fraction(3, 2), -H)]}


# {{{ exact construction

def _inverse(matrix):
    """Inverse of a square matrix of Fractions (Gauss-Jordan)."""
    n = len(matrix)
    rows = [list(row) + [Fraction(int(i == j)) for j in range(n)] for i, row in enumerate(matrix)]
    for col in range(n):
        pivot = next(r for r in range(col, n) if rows[r][col] != 0)
        rows[col], rows[pivot] = rows[pivot], rows[col]
        scale = rows[col][col]
        rows[col] = [v / scale for v in rows[col]]
        for r in range(n):
            if r != col and rows[r][col] != 0:
                factor = rows[r][col]
                rows[r] = [a - factor * b for a, b in zip(rows[r], rows[col])]
    return [row[n:] for row in rows]


def _evaluation(points, size):
    """Rows (p^0 .. p^(size-1)) for each finite point, then the point at infinity."""
    rows = [[Fraction(p) ** i for i in range(size)] for p in points]
    return rows + [[Fraction(int(i == size - 1)) for i in range(size)]]


def matrices(m, points=None):
    """(A^T, G, B^T) of F(m, 3) as lists of Fraction rows: m x alpha, alpha x 3, alpha x alpha."""
    points = POINTS[m] if points is None else points
    alpha = m + R - 1
    assert len(points) == alpha - 1 and len(set(points)) == len(points)
    at = [list(col) for col in zip(*_evaluation(points, m))]
    g = _evaluation(points, R)
    inverse = _inverse(_evaluation(points, alpha))
    bt = [list(col) for col in zip(*inverse)]            # V^-T
    for k, row in enumerate(bt):
        scale = Fraction(lcm(*(v.denominator for v in row)), gcd(*(v.numerator for v in row)))
        first = next(v for v in row if v != 0)
        scale = scale if first * scale > 0 else -scale
        bt[k] = [v * scale for v in row]
        g[k] = [v / scale for v in g[k]]
    return at, g, bt


def correlate_check(m, mats=None):
    """Largest error of y = A^T[(G g) * (B^T d)] against the direct correlation, in exact
    arithmetic, over unit vectors d and g (it must be 0)."""
    at, g, bt = mats or matrices(m)
    alpha = m + R - 1
    worst = 0
    for t in range(alpha):
        for k in range(R):
            d = [Fraction(int(i == t)) for i in range(alpha)]
            f = [Fraction(int(i == k)) for i in range(R)]
            u = [sum(a * b for a, b in zip(row, f)) for row in g]
            v = [sum(a * b for a, b in zip(row, d)) for row in bt]
            y = [sum(a * x * z for a, x, z in zip(row, u, v)) for row in at]
            direct = [sum(d[i + j] * f[j] for j in range(R)) for i in range(m)]
            worst = max(worst, max(abs(a - b) for a, b in zip(y, direct)))
    return worst

# }}}

# {{{ code emission: an assignment list that can be printed and evaluated


def _pairs_by_rows(matrix):
    """Pairs (a, b, sign) of rows with M[b][j] = sign * (-1)^j * M[a][j] and both odd and even
    terms (the rows of points +p and -p)."""
    pairs, used = [], set()
    for a, row_a in enumerate(matrix):
        if a in used or not any(row_a[0::2]) or not any(row_a[1::2]):
            continue
        for b in range(a + 1, len(matrix)):
            if b in used:
                continue
            for sign in (1, -1):
                if all(matrix[b][j] == sign * (-1) ** j * row_a[j] for j in range(len(row_a))):
                    pairs.append((a, b, sign))
                    used.update((a, b))
                    break
            if a in used:
                break
    return pairs


def _lincomb(terms):
    """C text of sum(coef * name), coefficients exact binary fractions or float32-rounded."""
    text = ""
    for coef, name in terms:
        if coef == 0:
            continue
        sign = "-" if coef < 0 else "+"
        size = abs(coef)
        if size == 1:
            term = name
        else:
            value = float(size)
            literal = repr(value) if Fraction(value) == size else \
                np.format_float_positional(np.float32(value), unique=True)
            term = f"{literal}f * {name}"
        text += (f" {sign} " if text else ("-" if sign == "-" else "")) + term
    return text or "(WINO_T)0"


def program(matrix, by_columns=False):
    """Assignments computing o = M x: a list of (target, [(coef, source)]) in order; sources are
    'x[j]', 'o[i]' targets and temporaries.  by_columns pairs columns (pre-combined inputs)
    instead of rows."""
    if by_columns:
        transposed = [list(col) for col in zip(*matrix)]
        steps, columns = [], {}
        for a, b, sign in _pairs_by_rows(transposed):
            steps.append((f"s{a}", [(1, f"x[{a}]"), (sign, f"x[{b}]")]))
            steps.append((f"d{a}", [(1, f"x[{a}]"), (-sign, f"x[{b}]")]))
            columns[a], columns[b] = (f"s{a}", f"d{a}"), None
        for i, row in enumerate(matrix):
            terms = []
            for j, coef in enumerate(row):
                if j in columns and columns[j] is None:
                    continue
                name = columns[j][i % 2] if j in columns else f"x[{j}]"
                terms.append((coef, name))
            steps.append((f"o[{i}]", terms))
        return steps
    steps, done = [], set()
    for a, b, sign in _pairs_by_rows(matrix):
        row = matrix[a]
        steps.append((f"e{a}", [(row[j], f"x[{j}]") for j in range(0, len(row), 2)]))
        steps.append((f"q{a}", [(row[j], f"x[{j}]") for j in range(1, len(row), 2)]))
        steps.append((f"o[{a}]", [(1, f"e{a}"), (1, f"q{a}")]))
        steps.append((f"o[{b}]", [(sign, f"e{a}"), (-sign, f"q{a}")]))
        done.update((a, b))
    for i, row in enumerate(matrix):
        if i not in done:
            steps.append((f"o[{i}]", [(coef, f"x[{j}]") for j, coef in enumerate(row)]))
    return steps


def evaluate(steps, size):
    """The matrix an assignment list computes (each output as a combination of the size inputs)."""
    values = {f"x[{j}]": [Fraction(int(i == j)) for i in range(size)] for j in range(size)}
    for target, terms in steps:
        values[target] = [sum(Fraction(c) * values[name][i] for c, name in terms if c)
                          for i in range(size)]
    outputs = sorted((k for k in values if k.startswith("o[")), key=lambda k: int(k[2:-1]))
    return [values[k] for k in outputs]


def emit(name, matrix, doc, by_columns=False):
    """One inline C function applying ``matrix`` (o = M x, strided)."""
    steps = program(matrix, by_columns)
    assert evaluate(steps, len(matrix[0])) == [[Fraction(v) for v in row] for row in matrix]
    lines = [f"/* {doc} */",
             f"WINO_INLINE void {name}(const WINO_T *x, const int xs, WINO_T *o, const int os)",
             "{"]
    for target, terms in steps:
        text = _lincomb([(c, n.replace("]", " * xs]") if n.startswith("x[") else n)
                         for c, n in terms])
        if target.startswith("o["):
            lines.append(f"    o[{target[2:-1]} * os] = {text};")
        else:
            lines.append(f"    const WINO_T {target} = {text};")
    return lines + ["}"]


def _show(name, matrix):
    """Comment lines showing a matrix, one row per line."""
    return [f" *   {name if i == 0 else ' ' * len(name)} {'[' + ', '.join(str(v) for v in row) + ']'}"
            for i, row in enumerate(matrix)]


def generate():
    """The text of winograd_transforms.cl."""
    out = ["/* winograd_transforms.cl: the 1-D Winograd transforms of F(m x m, 3 x 3), m = 2, 4, 6.",
           " *",
           " * GENERATED by plugins/winograd/tools/gen_transforms.py (its docstring derives the",
           " * matrices); do not edit, rerun it.  tests/test_transforms.py checks that this file is",
           " * what the script writes and that the matrices are exact.",
           " *",
           " * Defines read: WINO_M (2, 4 or 6: the output tile), WINO_T (the element type the",
           " * functions work on, e.g. float16), WINO_INLINE (function qualifiers).",
           " * Each function computes o[i * os] = sum_j M[i][j] * x[j * xs]:",
           " *   wino_bt   B^T (alpha x alpha)  input tile -> transformed input",
           " *   wino_g    G   (alpha x 3)      filter row -> transformed filter",
           " *   wino_at   A^T (m x alpha)      transformed output -> output tile",
           " *   wino_a    A   (alpha x m)      output-gradient tile -> transformed (backward-weights)",
           " *   wino_gt   G^T (3 x alpha)      transformed weight gradient -> 3 taps",
           " */",
           "#ifndef WINO_M", "#define WINO_M 4 /* output tile size m of F(m x m, 3 x 3) */",
           "#endif"]
    for index, m in enumerate(sorted(POINTS)):
        at, g, bt = matrices(m)
        a = [list(col) for col in zip(*at)]
        gt = [list(col) for col in zip(*g)]
        points = ", ".join(str(p) for p in POINTS[m]) + ", inf"
        out += ["", f"#{'el' if index else ''}if WINO_M == {m}",
                f"/* F({m}x{m}, 3x3): alpha = {m + R - 1}, points {points}; rows of"]
        out += _show("A^T =", at) + _show("G   =", g) + _show("B^T =", bt)
        out += [" */", f"#define WINO_ALPHA {m + R - 1}"]
        out += emit("wino_bt", bt, "o = B^T x")
        out += emit("wino_g", g, "o = G x")
        out += emit("wino_at", at, "o = A^T x", by_columns=True)
        out += emit("wino_a", a, "o = A x")
        out += emit("wino_gt", gt, "o = G^T x", by_columns=True)
    return "\n".join(out + ["#else", '#error "winograd_transforms.cl: WINO_M must be 2, 4 or 6"',
                            "#endif", ""])

# }}}

# {{{ point-set accuracy


def float32_error(m, points, channels=64, tiles=4000, seed=0):
    """Relative RMS error against float64 of a 2-D F(m, 3) over ``channels`` summed in the
    transformed domain, every operation in float32, on uniform [-1, 1] data."""
    at, g, bt = (np.array([[float(v) for v in row] for row in mat], np.float64)
                 for mat in matrices(m, points))
    rng = np.random.default_rng(seed)
    alpha = m + R - 1
    d = rng.uniform(-1, 1, (tiles, channels, alpha, alpha))
    f = rng.uniform(-1, 1, (channels, R, R))
    exact = sum(np.stack([d[:, :, i:i + m, j:j + m] * f[None, :, i, j, None, None]
                          for i in range(R) for j in range(R)]).sum(0).sum(1)[None])
    d32, f32 = d.astype(np.float32), f.astype(np.float32)
    at32, g32, bt32 = (x.astype(np.float32) for x in (at, g, bt))
    u = g32 @ f32 @ g32.T
    v = bt32 @ d32 @ bt32.T
    y = at32 @ (u[None] * v).sum(1, dtype=np.float32) @ at32.T
    return float(np.sqrt(np.mean((y - exact) ** 2) / np.mean(exact ** 2)))


def report_points():
    for m in sorted(POINTS):
        for points in [POINTS[m]] + CANDIDATES.get(m, []):
            label = ", ".join(str(p) for p in points)
            print(f"F({m},3) points {label:38s} error {float32_error(m, points):.3g}"
                  + ("  (chosen)" if points == POINTS[m] else ""))

# }}}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    parser.add_argument("--points", action="store_true", help="float32 error of point sets")
    args = parser.parse_args(argv)
    if args.points:
        report_points()
        return 0
    for m in POINTS:
        assert correlate_check(m) == 0, m
    text = generate()
    if args.check:
        stale = not OUT.exists() or OUT.read_text() != text
        print(f"{OUT}: {'stale, rerun the script' if stale else 'up to date'}")
        return int(stale)
    OUT.write_text(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
