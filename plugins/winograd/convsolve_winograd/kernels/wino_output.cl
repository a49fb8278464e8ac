/* wino_output.cl: the output transform of Winograd F(m x m, 3 x 3): y = A^T M A of the
 * transformed outputs (forward; dx for backward-data), stored with the output's epilogue
 * (winograd_common.cl: tiles, runs, WINO_STORE_RUN).
 *
 * wino_output(mm, mm_off, y, K, OH, OW, TH, TW, r0, rows, pitch [, CS_EPILOGUE_PARAMS])
 * Range: 1-D, K * rows * ceil(TW / TT) work-items, any local size.
 *
 * Defines read: WINO_M, TT, CS_PRECISION, CS_EPI and the epilogue's structure
 * (winograd_common.cl).
 */
#include "winograd_common.cl"

/* Output tiles: y[n][k][th * m + i][tw * m + j] = (A^T M A)[i][j], M in plain rows (K
 * channels, `rows` tile rows of the chunk), and its epilogue with CS_EPI; elements past OH, OW
 * are not stored. */
__kernel void wino_output(__global const real *mm, const int mm_off, __global real *y,
                          const int K, const int OH, const int OW, const int TH, const int TW,
                          const int r0, const int rows, const int pitch CS_EPI_ARGS)
{
    int k, r, tw0, nt;
    if (!wino_run(get_global_id(0), K, rows, TW, false, &k, &r, &tw0, &nt))
        return;
    CS_EPI_VALUES(epi, 0);
    const int n = (r0 + r) / TH, th = (r0 + r) % TH;
    __global const real *base = mm + mm_off + (size_t)k * pitch + r * TW + tw0;
    wvec v[ALPHA][ALPHA], t[ALPHA * WINO_M], o[WINO_M * WINO_M];
#pragma unroll
    for (int i = 0; i < ALPHA; ++i)
#pragma unroll
        for (int j = 0; j < ALPHA; ++j)
            v[i][j] = WVLOAD(base + (size_t)(i * ALPHA + j) * K * pitch);
#pragma unroll
    for (int i = 0; i < ALPHA; ++i)
        wino_at(v[i], 1, t + i * WINO_M, 1);    /* t[i][j] = sum_l A^T[j][l] v[i][l] */
#pragma unroll
    for (int j = 0; j < WINO_M; ++j)
        wino_at(t + j, WINO_M, o + j, WINO_M);  /* o[i][j] = sum_l A^T[i][l] t[l][j] */
    const int c0 = tw0 * WINO_M, width = min(nt * WINO_M, OW - c0);
#pragma unroll 1 /* rolled, as in wino_input */
    for (int i = 0; i < WINO_M; ++i) {
        const int oh = th * WINO_M + i;
        if (oh >= OH)
            break;
        __global real *at = y + CS_NCHW(n, k, oh, c0, K, OH, OW);
        wvec *oi = o + i * WINO_M;
        WINO_STORE_RUN(y, at, WINO_INTERLEAVE(oi, 0), min(TT, width), k);
        if (TT < width)
            WINO_STORE_RUN(y, at + TT, WINO_INTERLEAVE(oi, 1), min(TT, width - TT), k);
        if (2 < WINO_M && 2 * TT < width)
            WINO_STORE_RUN(y, at + 2 * TT, WINO_INTERLEAVE(oi, 2), min(TT, width - 2 * TT), k);
        if (3 < WINO_M && 3 * TT < width)
            WINO_STORE_RUN(y, at + 3 * TT, WINO_INTERLEAVE(oi, 3), min(TT, width - 3 * TT), k);
        if (4 < WINO_M && 4 * TT < width)
            WINO_STORE_RUN(y, at + 4 * TT, WINO_INTERLEAVE(oi, 4), min(TT, width - 4 * TT), k);
        if (5 < WINO_M && 5 * TT < width)
            WINO_STORE_RUN(y, at + 5 * TT, WINO_INTERLEAVE(oi, 5), min(TT, width - 5 * TT), k);
    }
}
