/* direct_fwd.cl: forward direct convolution, TILE_K output channels of one pixel per work-item.
 *
 * Layouts: x NCHW, w KCRS (C = channels per group), y N K OH OW; all packed.
 * Launch: a 1-D range of N * ceil(K / TILE_K) * OH * OW work-items, any local size.
 * A work-item's TILE_K channels may cross a group boundary: each channel reads its own group.
 *
 * Defines read: the problem's sizes from Problem.defines() (CS_N ... CS_DIL_W), CS_PRECISION, and
 * the tunable below.
 */
#include "convsolve.h"

#ifndef TILE_K
#define TILE_K 4  /* output channels each work-item computes (reuses each input value TILE_K times) */
#endif

#define K_TILES CS_DIV_UP(CS_K, TILE_K)
#define C_PER_GROUP (CS_C / CS_GROUPS)
#define K_PER_GROUP (CS_K / CS_GROUPS)

__kernel void direct_fwd(__global const real *x, __global const real *w, __global real *y)
{
    const int index = get_global_id(0);
    const int ow = index % CS_OW;
    const int oh = (index / CS_OW) % CS_OH;
    const int k0 = ((index / (CS_OW * CS_OH)) % K_TILES) * TILE_K;
    const int n = index / (CS_OW * CS_OH * K_TILES);
    float acc[TILE_K];
    for (int t = 0; t < TILE_K; ++t)
        acc[t] = 0.0f;
    for (int t = 0; t < TILE_K; ++t) {
        const int k = k0 + t;
        if (k >= CS_K)
            break;
        const int c0 = (k / K_PER_GROUP) * C_PER_GROUP;
        for (int c = 0; c < C_PER_GROUP; ++c) {
            __global const real *plane = x + CS_NCHW(n, c0 + c, 0, 0, CS_C, CS_H, CS_W);
            for (int r = 0; r < CS_R; ++r) {
                const int ih = oh * CS_STRIDE_H - CS_PAD_T + r * CS_DIL_H;
                for (int s = 0; s < CS_S; ++s) {
                    const int iw = ow * CS_STRIDE_W - CS_PAD_L + s * CS_DIL_W;
                    /* padding is zeros that take part in the products (0 * inf = NaN) */
                    acc[t] += cs_padded_load(plane, ih, iw, CS_H, CS_W)
                            * (float)w[CS_NCHW(k, c, r, s, C_PER_GROUP, CS_R, CS_S)];
                }
            }
        }
    }
    for (int t = 0; t < TILE_K && k0 + t < CS_K; ++t)
        y[CS_NCHW(n, k0 + t, oh, ow, CS_K, CS_OH, CS_OW)] = (real)acc[t];
}
