/* wino_filter_out.cl: the weight-gradient output transform of Winograd F(m x m, 3 x 3):
 * dw = G^T S G of the transformed weight gradient S (backward-weights, after the last chunk's
 * sum), stored with the output's epilogue (winograd_common.cl: filters).
 *
 * wino_filter_out(sum, sum_off, plane, dw, K, Cg, Cgpad [, CS_EPILOGUE_PARAMS])
 * Range: 1-D, K * ceil(Cg / TT) work-items, any local size.
 *
 * Defines read: WINO_M, TT, SPLIT, CS_PRECISION, CS_EPI and the epilogue's structure
 * (winograd_common.cl).
 */
#include "winograd_common.cl"

#ifndef SPLIT
#define SPLIT 1 /* copies of S to add up, in order, alpha^2 planes apart (wino_gemm_local.cl) */
#endif

/* dw[k][c][r][s] = (G^T S[.][k][c] G)[r][s] for TT adjacent c, S in [pos][k][Cgpad] at
 * sum_off (the sum of its SPLIT copies), and its epilogue (alpha, blend) with CS_EPI. */
__kernel void wino_filter_out(__global const real *sum, const int sum_off, const int plane,
                              __global real *dw, const int K, const int Cg,
                              const int Cgpad CS_EPI_ARGS)
{
    const int blocks = CS_DIV_UP(Cg, TT);
    const int gid = get_global_id(0);
    if (gid >= blocks * K)
        return;
    const int c0 = (gid % blocks) * TT, k = gid / blocks;
    const int live = min(TT, Cg - c0);
    CS_EPI_VALUES(epi, 0);
    __global const real *src = sum + sum_off + (size_t)k * Cgpad + c0;
    wvec v[ALPHA][ALPHA], t[ALPHA * 3], o[3 * 3];
#pragma unroll
    for (int i = 0; i < ALPHA; ++i)
#pragma unroll
        for (int j = 0; j < ALPHA; ++j) {
            v[i][j] = WVLOAD(src + (size_t)(i * ALPHA + j) * plane); /* inside Cgpad */
            for (int q = 1; q < SPLIT; ++q)
                v[i][j] += WVLOAD(src + (size_t)((q * ALPHA + i) * ALPHA + j) * plane);
        }
#pragma unroll
    for (int i = 0; i < ALPHA; ++i)
        wino_gt(v[i], 1, t + i * 3, 1);      /* t[i][s] = sum_j G^T[s][j] v[i][j] */
#pragma unroll
    for (int s = 0; s < 3; ++s)
        wino_gt(t + s, 3, o + s, 3);         /* o[r][s] = sum_i G^T[r][i] t[i][s] */
    float taps[3][3][TT];
#pragma unroll
    for (int r = 0; r < 3; ++r)
#pragma unroll
        for (int s = 0; s < 3; ++s)
            WVSTORE(o[r * 3 + s], taps[r][s]);
    const size_t at = ((size_t)k * Cg + c0) * 9;
    for (int l = 0; l < live; ++l)
        for (int r = 0; r < 3; ++r)
            for (int s = 0; s < 3; ++s)
                CS_EPI_STORE(epi, dw, at + l * 9 + r * 3 + s, k, taps[r][s][l]);
}
