/* wino_grad.cl: the output-gradient transform of Winograd F(m x m, 3 x 3) for backward-weights:
 * E = A e A^T of the m x m tiles of dy, stored as plain rows (winograd_common.cl).
 *
 * wino_grad(dy, out, out_off, N, K, OH, OW, TH, TW, r0, rows, pitch)
 * Range: 1-D, K * rows * ceil(TW / TT) work-items, any local size.
 *
 * Defines read: WINO_M, TT, CS_PRECISION (winograd_common.cl).
 */
#include "winograd_common.cl"

/* Transformed output-gradient tiles: out(pos, k, p) = (A e A^T)[pos] of the m x m tile p of
 * channel k of dy (K x OH x OW per image), zero past OH, OW. */
__kernel void wino_grad(__global const real *dy, __global real *out, const int out_off,
                        const int N, const int K, const int OH, const int OW, const int TH,
                        const int TW,
                        const int r0, const int rows, const int pitch)
{
    int k, r, tw0, nt;
    if (!wino_run(get_global_id(0), K, rows, TW, false, &k, &r, &tw0, &nt))
        return;
    const int n = (r0 + r) / TH, th = (r0 + r) % TH;
    __global const real *plane = dy + CS_NCHW(n, k, 0, 0, K, OH, OW);
    wvec e[WINO_M][8], t[WINO_M * ALPHA], o[ALPHA * ALPHA];
#pragma unroll 1 /* rolled, as in wino_input */
    for (int i = 0; i < WINO_M; ++i) {
        const int oh = th * WINO_M + i;
        const bool inside = oh < OH;
        wvec s[SEGV];
        const long back = (long)((plane - dy) + (size_t)(inside ? oh : 0) * OW);
        wino_load_segment(s, plane + (size_t)(inside ? oh : 0) * OW, inside, tw0 * WINO_M, OW,
                          nt * WINO_M, back, (long)N * K * OH * OW - back);
        WINO_DEAL_ROW(e[i], s, WINO_M)
    }
#pragma unroll
    for (int i = 0; i < WINO_M; ++i)
        wino_a(e[i], 1, t + i * ALPHA, 1);     /* t[i][l] = sum_j A[l][j] e[i][j] */
#pragma unroll
    for (int l = 0; l < ALPHA; ++l)
        wino_a(t + l, ALPHA, o + l, ALPHA);   /* o[k][l] = sum_i A[k][i] t[i][l] */
    wino_store_tiles(out + out_off, o, K, k, r * TW + tw0, nt, pitch, 0, 0, 1, 1);
}
