/* wino_gemm.cl: the batched products of Winograd convolution (forward, backward-data), one per
 * transform position and group, register-tiled with explicit vectors, no local memory
 * (CPU-shaped):
 *   M[pos][g * Rows + row][p] = sum_d U[pos][g][d][row] * V[pos][g * D + d][p],  p < P
 *   U: panels of UPACK rows, [pos][g][row / UPACK][d][row % UPACK], positions u_plane apart
 *   (wino_filter.cl; rows past Rows repeat the last one); V and M: plain rows of `pitch`
 *   elements (wino_input.cl, wino_output.cl), pitch >= P rounded up to 32.
 * A work-item owns a panel of TN tiles and MR row blocks of TM rows of one (pos, g): a TM x TN
 * register tile of TM x NV vectors of VW, fed per d by TM broadcasts of adjacent elements of U
 * (rows past Rows are computed, not stored) and NV vector loads of V's row d (the panel's D
 * rows of TN stay in cache for the MR blocks; tiles past P, up to the panel's end, are garbage
 * in and out, inside the row's pitch).  Operands in the workspace come with an element offset
 * (*_off).
 *
 * wino_gemm(u, u_off, u_plane, v, v_off, mm, mm_off, Rows, D, G, P, pitch, npos)
 * Range: 1-D, panels fastest, then row groups, then (pos, g); any local size.
 *
 * Defines read: TM, VW, NV, MR, CS_PRECISION (winograd_common.cl).
 */
#include "winograd_common.cl"

__kernel void wino_gemm(__global const real *restrict u, const int u_off, const int u_plane,
                        __global const real *restrict v, const int v_off,
                        __global real *restrict mm, const int mm_off,
                        const int Rows, const int D, const int G, const int P, const int pitch,
                        const int npos)
{
    const int panels = CS_DIV_UP(P, TN), groups = CS_DIV_UP(Rows, TM * MR);
    const int gid = get_global_id(0);
    if (gid >= panels * groups * npos * G)
        return;
    const int pb = gid % panels, rg = (gid / panels) % groups, b = gid / (panels * groups);
    const int pos = b / G, g = b % G;
    const int upanels = CS_DIV_UP(Rows, UPACK);
    __global const real *ub = u + u_off + (size_t)pos * u_plane + (size_t)g * upanels * D * UPACK;
    __global const real *vb = v + v_off + ((size_t)pos * G + g) * D * pitch + pb * TN;
    __global real *mb = mm + mm_off + ((size_t)pos * G + g) * Rows * pitch + pb * TN;
    for (int mr = 0; mr < MR; ++mr) {
        const int r0 = (rg * MR + mr) * TM;
        if (r0 >= Rows)
            break;
        gvec acc[TM][NV];
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < NV; ++j)
                acc[i][j] = (gvec)0.0f;
        WINO_GEMM_LOOP(acc, ub + (size_t)(r0 / UPACK) * D * UPACK + r0 % UPACK, vb, pitch, D)
#pragma unroll
        for (int i = 0; i < TM; ++i)
            if (r0 + i < Rows)
#pragma unroll
                for (int j = 0; j < NV; ++j)
                    GVSTORE(acc[i][j], mb + (size_t)(r0 + i) * pitch + j * VW);
    }
}
