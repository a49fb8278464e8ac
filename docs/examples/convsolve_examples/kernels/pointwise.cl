/* pointwise.cl: forward 1x1 convolution (stride 1, no padding or dilation, groups 1) as a matrix
 * product per image: y[n, k, p] = sum over c of w[k, c] * x[n, c, p], p a pixel of H x W.
 *
 * Layouts: x NCHW, w KC11, y NKHW; all packed.
 * Launch: a 1-D range of N * ceil(K / TILE_K) * ceil(H * W / TILE_P) work-items, any local size;
 * each computes TILE_K output channels of TILE_P consecutive pixels.
 *
 * Defines read: the problem's sizes from Problem.defines() (CS_N, CS_C, CS_H, CS_W, CS_K),
 * CS_PRECISION, and the tunables below (examples.Pointwise's default for any device: "*").
 */
#include "convsolve.h"

#ifndef TILE_K
#define TILE_K 2  /* output channels per work-item (each x value is used TILE_K times) */
#endif
#ifndef TILE_P
#define TILE_P 1  /* consecutive pixels per work-item (each w value is used TILE_P times) */
#endif

#define PIXELS (CS_H * CS_W)
#define K_TILES CS_DIV_UP(CS_K, TILE_K)
#define P_TILES CS_DIV_UP(PIXELS, TILE_P)

__kernel void pointwise_fwd(__global const real *x, __global const real *w, __global real *y)
{
    const int index = get_global_id(0);
    const int p0 = (index % P_TILES) * TILE_P;
    const int k0 = ((index / P_TILES) % K_TILES) * TILE_K;
    const int n = index / (P_TILES * K_TILES);
    float acc[TILE_K][TILE_P];
    for (int t = 0; t < TILE_K; ++t)
        for (int q = 0; q < TILE_P; ++q)
            acc[t][q] = 0.0f;
    for (int c = 0; c < CS_C; ++c)
        for (int t = 0; t < TILE_K; ++t)
            for (int q = 0; q < TILE_P; ++q)
                if (k0 + t < CS_K && p0 + q < PIXELS)
                    acc[t][q] += (float)w[(k0 + t) * CS_C + c]
                               * (float)x[CS_NCHW(n, c, 0, 0, CS_C, CS_H, CS_W) + p0 + q];
    for (int t = 0; t < TILE_K && k0 + t < CS_K; ++t)
        for (int q = 0; q < TILE_P && p0 + q < PIXELS; ++q)
            y[CS_NCHW(n, k0 + t, 0, 0, CS_K, CS_H, CS_W) + p0 + q] = (real)acc[t][q];
}
