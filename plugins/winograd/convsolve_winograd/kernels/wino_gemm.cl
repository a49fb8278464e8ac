/* wino_gemm.cl: the batched products of Winograd convolution, one per transform position and
 * group, register-tiled with explicit vectors, no local memory (CPU-shaped).
 *
 * wino_gemm (forward, backward-data):
 *   M[pos][g * Rows + row][p] = sum_d U[pos][g][d][row] * V[pos][g * D + d][p],  p < P
 *   U: panels of UPACK rows, [pos][g][row / UPACK][d][row % UPACK], positions u_plane apart
 *   (wino_data.cl's wino_filter; rows past Rows repeat the last one); V and M: plain rows of
 *   `pitch` elements (wino_data.cl), pitch >= P rounded up to 32.
 *   A work-item owns a panel of TN tiles and MR row blocks of TM rows of one (pos, g): a TM x TN
 *   register tile of TM x NV vectors of VW, fed per d by TM broadcasts of adjacent elements of
 *   U (rows past Rows are computed, not stored) and NV vector loads of V's row d (the panel's
 *   D rows of TN stay in cache for the MR blocks; tiles past P, up to the panel's end, are
 *   garbage in and out, inside the row's pitch).  Range: 1-D, panels fastest, then row groups,
 *   then (pos, g).
 * wino_gemm_wrw (backward-weights): the same register tile over tile-major x, its vectors along
 *   the input channels (the comment above it).
 * Operands in the workspace come with an element offset (*_off).
 *
 * Defines read: TM, VW, NV, MR, WINO_KERNEL (below), CS_PRECISION (convsolve.h).
 */
#include "convsolve.h"

#ifndef VW
#define VW 16 /* vector width along the tiles (wino_gemm) or channels (wino_gemm_wrw): 1-16 */
#endif
#ifndef NV
#define NV 2 /* vectors per register-tile row; TN = NV * VW columns per panel */
#endif
#ifndef TM
#define TM 8 /* rows (output channels) per register tile; divides UPACK */
#endif
#ifndef MR
#define MR 16 /* row blocks of TM rows per work-item, over one panel */
#endif
#ifndef WINO_KERNEL
#define WINO_KERNEL 0 /* the kernel to compile: 0 both, 1 wino_gemm, 2 wino_gemm_wrw */
#endif
#define TN (NV * VW)
#define UPACK 16 /* rows per panel of U (wino_data.cl) */
#if UPACK % TM != 0
#error "wino_gemm.cl: TM must divide UPACK (16)"
#endif

#define WINO_CAT_(a, b) a##b
#define WINO_CAT(a, b) WINO_CAT_(a, b)
#if VW == 1
typedef float gvec;
#define GVLOAD(p) (*(p))
#define GVSTORE(v, p) (*(p) = (v))
#else
typedef WINO_CAT(float, VW) gvec;
#define GVLOAD(p) WINO_CAT(vload, VW)(0, p)
#define GVSTORE(v, p) WINO_CAT(vstore, VW)(v, 0, p)
#endif

/* One reduction step of the TM x NV register tile acc: acc[i][j] += A(i) * brow[j * VW ..] for
 * i < TM, j < NV, A(i) being the expression a_i in the index name i.  A macro, as in the gemm
 * plugin: written as an inlined function taking acc by pointer, LLVM 15 spills the tile. */
#define WINO_GEMM_STEP(acc, i, a_i, brow)                                               \
    {                                                                                   \
        gvec b_[NV];                                                                    \
        _Pragma("unroll") for (int j_ = 0; j_ < NV; ++j_)                               \
            b_[j_] = GVLOAD((brow) + j_ * VW);                                          \
        _Pragma("unroll") for (int i = 0; i < TM; ++i) {                                \
            const gvec a_ = (gvec)(a_i);                                                \
            _Pragma("unroll") for (int j_ = 0; j_ < NV; ++j_)                           \
                (acc)[i][j_] = fma(a_, b_[j_], (acc)[i][j_]);                           \
        }                                                                               \
    }

/* acc += the product of the D x TM block of U whose step-d row starts at ua + d * UPACK and
 * the D x TN panel whose row d starts at vb + d * pitch.  Not unrolled: unrolled, LLVM 15
 * hoists the broadcasts of later steps and spills them. */
#define WINO_GEMM_LOOP(acc, ua, vb, pitch, D)                                           \
    {                                                                                   \
        __global const real *ap_ = (ua);                                                \
        __global const real *bp_ = (vb);                                                \
        for (int d_ = 0; d_ < (D); ++d_) {                                              \
            WINO_GEMM_STEP(acc, i_, ap_[i_], bp_)                                       \
            ap_ += UPACK;                                                               \
            bp_ += (pitch);                                                             \
        }                                                                               \
    }

#if WINO_KERNEL == 0 || WINO_KERNEL == 1
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
#endif

#if WINO_KERNEL == 0 || WINO_KERNEL == 2
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
#endif
