/* wino_input.cl: the input transform of Winograd F(m x m, 3 x 3): V = B^T d B of the
 * alpha x alpha input tiles (forward, backward-data, and x of backward-weights), stored as plain
 * rows or, for backward-weights, tile-major rows (winograd_common.cl: tiles, runs, layouts).
 *
 * wino_input(x, out, out_off, N, C, H, W, Hl, Wl, pad_t, pad_l, TH, TW, r0, rows, pitch, lanes,
 *            Cg, Cgpad)
 * Range: 1-D, C * rows * ceil(TW / TT) work-items, any local size.
 *
 * Defines read: WINO_M, TT, CS_PRECISION (winograd_common.cl).
 */
#include "winograd_common.cl"

/* Transformed input tiles: out(pos, c, p) = (B^T d B)[pos] of input tile p of channel c, in
 * plain rows (lanes = 0) or, for backward-weights, tile-major rows of `lanes` elements
 * (wino_store_tiles).  Rows from Hl and columns from Wl on (<= H, W) read as zero: no valid
 * output reads them (a partial last tile would), so a NaN there reaches no output. */
__kernel void wino_input(__global const real *x, __global real *out, const int out_off,
                         const int N, const int C, const int H, const int W, const int Hl,
                         const int Wl, const int pad_t, const int pad_l, const int TH,
                         const int TW, const int r0, const int rows, const int pitch,
                         const int lanes, const int Cg, const int Cgpad)
{
    int c, r, tw0, nt;
    if (!wino_run(get_global_id(0), C, rows, TW, lanes > 0, &c, &r, &tw0, &nt))
        return;
    const int n = (r0 + r) / TH, th = (r0 + r) % TH;
    __global const real *plane = x + CS_NCHW(n, c, 0, 0, C, H, W);
    wvec d[ALPHA][8], t[ALPHA * ALPHA], o[ALPHA * ALPHA];
#pragma unroll 1 /* rolled: unrolled, m = 6 took 15 s to build on PoCL, and ran no faster */
    for (int i = 0; i < ALPHA; ++i) {
        const int ih = th * WINO_M - pad_t + i;
        const bool inside = ih >= 0 && ih < Hl;
        wvec s[SEGV];
        const long back = (long)((plane - x) + (size_t)(inside ? ih : 0) * W);
        wino_load_segment(s, plane + (size_t)(inside ? ih : 0) * W, inside,
                          tw0 * WINO_M - pad_l, Wl, nt * WINO_M + 2, back,
                          (long)N * C * H * W - back);
        WINO_DEAL_ROW(d[i], s, ALPHA)
    }
#pragma unroll
    for (int i = 0; i < ALPHA; ++i)
        wino_bt(d[i], 1, t + i * ALPHA, 1);    /* t[i][l] = sum_j B^T[l][j] d[i][j] */
#pragma unroll
    for (int l = 0; l < ALPHA; ++l)
        wino_bt(t + l, ALPHA, o + l, ALPHA);  /* o[k][l] = sum_i B^T[k][i] t[i][l] */
    wino_store_tiles(out + out_off, o, C, c, r * TW + tw0, nt, pitch, lanes, rows * TW, Cg,
                     Cgpad);
}
