/* wino_gemm_wrw.cl: the batched products of Winograd backward-weights, one per transform
 * position and group: wino_gemm.cl's register tile over the tile-major transformed x, its
 * vectors along the input channels, summed over the tiles of a chunk (the comment below).
 *
 * wino_gemm_wrw(e, e_off, e_pitch, x, x_off, x_row, x_plane, s, s_off, s_plane, Kg, Cg, Cgpad,
 *               G, P, npos, accumulate)
 * Range: 1-D, column panels fastest, then row groups, then (pos, g); any local size.
 *
 * Defines read: TM, VW, NV, MR, CS_PRECISION (winograd_common.cl).
 */
#include "winograd_common.cl"

/* Backward-weights: S[pos][g * Kg + k][c] (+)= sum_p E[pos][g * Kg + k][p] * X[pos][p][g][c]
 * for c < Cg, p < P.  E: plain rows [pos][K][e_pitch] (wino_grad); X: tile-major rows
 * [pos][p][x_row], group g's channels at g * Cgpad (wino_input with lanes = x_row), positions
 * x_plane apart; S: rows of Cgpad, [pos][K][Cgpad], positions s_plane apart, overwritten by the
 * first chunk and accumulated by the others (accumulate = 1), the columns past Cg garbage.
 * The register tile is wino_gemm's, broadcasting E (TM rows, clamped at Kg) and loading
 * vectors of X along the channels.  Range: 1-D, column panels fastest, then row groups, then
 * (pos, g). */
__kernel void wino_gemm_wrw(__global const real *restrict e, const int e_off, const int e_pitch,
                            __global const real *restrict x, const int x_off, const int x_row,
                            const int x_plane, __global real *restrict s, const int s_off,
                            const int s_plane, const int Kg, const int Cg, const int Cgpad,
                            const int G, const int P, const int npos, const int accumulate)
{
    const int panels = CS_DIV_UP(Cg, TN), groups = CS_DIV_UP(Kg, TM * MR);
    const int gid = get_global_id(0);
    if (gid >= panels * groups * npos * G)
        return;
    const int pb = gid % panels, rg = (gid / panels) % groups, b = gid / (panels * groups);
    const int pos = b / G, g = b % G;
    __global const real *eb = e + e_off + ((size_t)pos * G + g) * Kg * e_pitch;
    __global const real *xb = x + x_off + (size_t)pos * x_plane + g * Cgpad + pb * TN;
    __global real *sb = s + s_off + (size_t)pos * s_plane + (size_t)g * Kg * Cgpad + pb * TN;
    for (int mr = 0; mr < MR; ++mr) {
        const int r0 = (rg * MR + mr) * TM;
        if (r0 >= Kg)
            break;
        __global const real *er[TM];
#pragma unroll
        for (int i = 0; i < TM; ++i)
            er[i] = eb + (size_t)min(r0 + i, Kg - 1) * e_pitch;
        gvec acc[TM][NV];
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < NV; ++j)
                acc[i][j] = (gvec)0.0f;
        __global const real *bp_ = xb;
        for (int p = 0; p < P; ++p) {
            WINO_GEMM_STEP(acc, i_, er[i_][p], bp_)
            bp_ += x_row;
        }
#pragma unroll
        for (int i = 0; i < TM; ++i)
            if (r0 + i < Kg)
#pragma unroll
                for (int j = 0; j < NV; ++j) {
                    __global real *dst = sb + (size_t)(r0 + i) * Cgpad + j * VW;
                    GVSTORE(accumulate ? acc[i][j] + GVLOAD(dst) : acc[i][j], dst);
                }
    }
}
