/* wino_filter.cl: the filter transform of Winograd F(m x m, 3 x 3): U = G f G^T of the 3 x 3
 * filters (forward; backward-data with flip = 1), in the panels of UPACK rows the GEMM
 * broadcasts from (winograd_common.cl: filters).
 *
 * wino_filter(w, u, u_off, plane, Rows, D, G, flip)
 * Range: 1-D, ceil(Rows / UPACK) * D * G work-items with PANEL_ITEMS (CPUs: a work-item per
 * panel, input channels d fastest, so each stores whole 64-byte panel rows of U beside its
 * neighbour's: 1.3-2x faster on PoCL than the GPUs' order, README), else ceil(Rows / UPACK) *
 * (UPACK / TT) * D * G (GPUs: TT rows a work-item, rows fastest, neighbouring work-items storing
 * neighbouring runs); any local size.
 *
 * Defines read: WINO_M, TT, PANEL_ITEMS, CS_PRECISION (winograd_common.cl).
 */
#include "winograd_common.cl"

#ifndef PANEL_ITEMS
#define PANEL_ITEMS 0
#endif

/* U(pos, g, d, row0 ..) = (G f G^T)[pos] for the TT filters of (g, d) from row row0 (rows past
 * Rows repeat the last; their U is never read). */
WINO_INLINE void wino_filter_lanes(__global const real *w, __global real *dst, const int plane,
                                   const int Rows, const int D, const int g, const int d,
                                   const int row0, const int flip)
{
    float taps[3][3][TT];
    for (int t = 0; t < TT; ++t) {
        const int row = min(row0 + t, Rows - 1);
        __global const real *src = flip ? w + ((size_t)(g * D + d) * Rows + row) * 9
                                        : w + ((size_t)(g * Rows + row) * D + d) * 9;
        for (int r = 0; r < 3; ++r)
            for (int c = 0; c < 3; ++c)
                taps[r][c][t] = flip ? src[(2 - r) * 3 + 2 - c] : src[r * 3 + c];
    }
    wvec f[3][3], t[3 * ALPHA], o[ALPHA * ALPHA];
#pragma unroll
    for (int r = 0; r < 3; ++r)
#pragma unroll
        for (int c = 0; c < 3; ++c)
            f[r][c] = WVLOAD(taps[r][c]);
#pragma unroll
    for (int r = 0; r < 3; ++r)
        wino_g(f[r], 1, t + r * ALPHA, 1);    /* t[r][l] = sum_s G[l][s] f[r][s] */
#pragma unroll
    for (int l = 0; l < ALPHA; ++l)
        wino_g(t + l, ALPHA, o + l, ALPHA);   /* o[k][l] = sum_r G[k][r] t[r][l] */
#pragma unroll
    for (int k = 0; k < ALPHA; ++k)
#pragma unroll
        for (int l = 0; l < ALPHA; ++l)
            WVSTORE(o[k * ALPHA + l], dst + (size_t)(k * ALPHA + l) * plane);
}

__kernel void wino_filter(__global const real *w, __global real *u, const int u_off,
                          const int plane, const int Rows, const int D, const int G,
                          const int flip)
{
    const int panels = CS_DIV_UP(Rows, UPACK);
    const int gid = get_global_id(0);
#if PANEL_ITEMS
    /* a work-item per (g, panel, d), d fastest */
    if (gid >= panels * D * G)
        return;
    const int d = gid % D, panel = (gid / D) % panels, g = gid / (D * panels);
    __global real *dst = u + u_off + (((size_t)g * panels + panel) * D + d) * UPACK;
    for (int part = 0; part < UPACK / TT; ++part)
        wino_filter_lanes(w, dst + part * TT, plane, Rows, D, g, d, panel * UPACK + part * TT,
                          flip);
#else
    /* TT rows per work-item, rows fastest */
    const int blocks = panels * (UPACK / TT);
    if (gid >= blocks * D * G)
        return;
    const int b = gid % blocks, d = (gid / blocks) % D;
    const int row0 = b * TT, g = gid / (blocks * D);
    wino_filter_lanes(w, u + u_off + (((size_t)g * panels + row0 / UPACK) * D + d) * UPACK
                      + row0 % UPACK, plane, Rows, D, g, d, row0, flip);
#endif
}
