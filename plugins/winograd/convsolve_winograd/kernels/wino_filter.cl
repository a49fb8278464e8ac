/* wino_filter.cl: the filter transform of Winograd F(m x m, 3 x 3): U = G f G^T of the 3 x 3
 * filters (forward; backward-data with flip = 1), in the panels of UPACK rows the GEMM
 * broadcasts from (winograd_common.cl: filters).
 *
 * wino_filter(w, u, u_off, plane, Rows, D, G, flip)
 * Range: 1-D, ceil(Rows / UPACK) * (UPACK / TT) * D * G work-items, any local size.
 *
 * Defines read: WINO_M, TT, CS_PRECISION (winograd_common.cl).
 */
#include "winograd_common.cl"

/* U(pos, g, d, row) = (G f G^T)[pos] for the filters f of (g, d, rows row0 .. row0 + TT - 1). */
__kernel void wino_filter(__global const real *w, __global real *u, const int u_off,
                          const int plane, const int Rows, const int D, const int G,
                          const int flip)
{
    const int panels = CS_DIV_UP(Rows, UPACK), blocks = panels * (UPACK / TT);
    const int gid = get_global_id(0);
    if (gid >= blocks * D * G)
        return;
    /* rows fastest: neighbouring work-items store neighbouring runs of U (d fastest, which
     * reads w in order for forward, was 1.4x slower: the stores are what costs) */
    const int b = gid % blocks, d = (gid / blocks) % D;
    const int row0 = b * TT, g = gid / (blocks * D);
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
    __global real *dst = u + u_off + (((size_t)g * panels + row0 / UPACK) * D + d) * UPACK
                         + row0 % UPACK;
#pragma unroll
    for (int k = 0; k < ALPHA; ++k)
#pragma unroll
        for (int l = 0; l < ALPHA; ++l)
            WVSTORE(o[k * ALPHA + l], dst + (size_t)(k * ALPHA + l) * plane);
}
