/* pointwise.cl: forward 1x1 convolution (stride 1, no padding or dilation, groups 1) as a matrix
 * product per image: y[n, k, p] = sum over c of w[k, c] * x[n, c, p], p a pixel of H x W.
 *
 * Layouts: x NCHW, w KC11 (with W_CK, its transpose CK: what transpose_w packs), y NKHW; all
 * packed.
 * Launch: a 1-D range of N * ceil(K / TILE_K) * ceil(H * W / TILE_P) work-items, any local size;
 * each computes TILE_K output channels of TILE_P consecutive pixels.
 *
 * The output's epilogue, if the problem has one (its values after the tensors,
 * CS_EPILOGUE_PARAMS), is fused into the store: each y element is written once, by one
 * work-item.
 *
 * Defines read: the problem's sizes from Problem.defines() (CS_N, CS_C, CS_H, CS_W, CS_K),
 * CS_PRECISION, the epilogue's CS_EPI_* (convsolve_epilogue.h), and the tunables below
 * (examples.Pointwise's default for any device: "*").
 */
#include "convsolve_epilogue.h"

#ifndef TILE_K
#define TILE_K 2  /* output channels per work-item (each x value is used TILE_K times) */
#endif
#ifndef TILE_P
#define TILE_P 1  /* consecutive pixels per work-item (each w value is used TILE_P times) */
#endif

#ifndef W_CK
#define W_CK 0    /* 1: w is read as C x K (transpose_w's packing for constant weights) */
#endif

#define PIXELS (CS_H * CS_W)
#define K_TILES CS_DIV_UP(CS_K, TILE_K)
#define P_TILES CS_DIV_UP(PIXELS, TILE_P)

__kernel void pointwise_fwd(__global const real *x, __global const real *w, __global real *y,
                            CS_EPILOGUE_PARAMS)
{
    const cs_epilogue e = CS_EPILOGUE_INIT(0, 0);
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
                    acc[t][q] += (float)w[W_CK ? c * CS_K + k0 + t : (k0 + t) * CS_C + c]
                               * (float)x[CS_NCHW(n, c, 0, 0, CS_C, CS_H, CS_W) + p0 + q];
    for (int t = 0; t < TILE_K && k0 + t < CS_K; ++t)
        for (int q = 0; q < TILE_P && p0 + q < PIXELS; ++q) {
            const size_t at = CS_NCHW(n, k0 + t, 0, 0, CS_K, CS_H, CS_W) + p0 + q;
            float v = acc[t][q];
            CS_EPILOGUE(float, CS_LOAD1, e, v, k0 + t, y, at);   /* nothing when bare */
            y[at] = (real)v;
        }
}

/* transpose_w(w, packed): packed[c, k] = w[k, c], one work-item per weight (a 1-D range of
 * CS_K * CS_C): the TILE_K weights a work-item reads for one input channel become adjacent. */
__kernel void transpose_w(__global const real *w, __global real *packed)
{
    const int i = get_global_id(0);   /* i = k * CS_C + c */
    if (i < CS_K * CS_C)
        packed[(i % CS_C) * CS_K + i / CS_C] = w[i];
}
