/* naive.cl: direct convolution, one work-item per output element, for all three directions.
 *
 * Layouts: x is NCHW, w is KCRS with C = channels per group, y is N K OH OW; all packed.
 * Groups: output channel k belongs to group k / (K/G) and reads input channels
 * [g*C/G, (g+1)*C/G).  Padding: PAD_T / PAD_L shift the window; bottom/right padding is implied by
 * OH and OW; padded elements are zeros that take part in the products (cs_padded_load), so
 * non-finite values propagate exactly as in the reference.  Accumulation in float.  Dynamic: every size is a kernel argument (CS_CONV_PARAMS),
 * so one build serves every problem.  Launch: a 1-D range of at least the output's element count,
 * any local size; work-items past the end return at once.  With CS_EPI each kernel stores the
 * output's epilogue (convsolve_epilogue.h; its values follow CS_CONV_PARAMS): one build per
 * epilogue structure.
 *
 * Defines read: CS_PRECISION (convsolve.h), the epilogue's (CS_EPI...).
 */
#include "convsolve_epilogue.h"

/* y[n, k, oh, ow] = sum over c, r, s of x[n, g*C/G + c, oh*SH - PT + r*DH, ow*SW - PL + s*DW] * w[k, c, r, s] */
__kernel void naive_fwd(__global const real *x, __global const real *w, __global real *y,
                        CS_CONV_PARAMS CS_EPI_ARGS)
{
    CS_EPI_VALUES(epi, 0);
    const size_t index = get_global_id(0);
    if (index >= (size_t)N * K * OH * OW)
        return;
    const int ow = index % OW;
    const int oh = (index / OW) % OH;
    const int k = (index / ((size_t)OW * OH)) % K;
    const int n = index / ((size_t)OW * OH * K);
    const int cpg = C / G;
    const int c0 = (k / (K / G)) * cpg;
    float acc = 0.0f;
    for (int c = 0; c < cpg; ++c) {
        __global const real *plane = x + CS_NCHW(n, c0 + c, 0, 0, C, H, W);
        for (int r = 0; r < R; ++r) {
            const int ih = oh * STRIDE_H - PAD_T + r * DIL_H;
            for (int s = 0; s < S; ++s) {
                const int iw = ow * STRIDE_W - PAD_L + s * DIL_W;
                acc += cs_padded_load(plane, ih, iw, H, W) * (float)w[CS_NCHW(k, c, r, s, cpg, R, S)];
            }
        }
    }
    CS_EPI_STORE(epi, y, index, k, acc);
}

/* dx[n, c, h, w] = sum over the k of c's group and the taps (r, s) whose window covers (h, w). */
__kernel void naive_bwd_data(__global real *dx, __global const real *w, __global const real *dy,
                             CS_CONV_PARAMS CS_EPI_ARGS)
{
    CS_EPI_VALUES(epi, 0);
    const size_t index = get_global_id(0);
    if (index >= (size_t)N * C * H * W)
        return;
    const int iw = index % W;
    const int ih = (index / W) % H;
    const int c = (index / ((size_t)W * H)) % C;
    const int n = index / ((size_t)W * H * C);
    const int cpg = C / G, kpg = K / G;
    const int k0 = (c / cpg) * kpg, cc = c % cpg;
    float acc = 0.0f;
    for (int kk = 0; kk < kpg; ++kk) {
        for (int r = 0; r < R; ++r) {
            const int th = ih + PAD_T - r * DIL_H;  /* = oh * STRIDE_H when tap r reaches ih */
            if (th < 0 || th % STRIDE_H != 0 || th / STRIDE_H >= OH)
                continue;
            for (int s = 0; s < S; ++s) {
                const int tw = iw + PAD_L - s * DIL_W;
                if (tw < 0 || tw % STRIDE_W != 0 || tw / STRIDE_W >= OW)
                    continue;
                acc += (float)dy[CS_NCHW(n, k0 + kk, th / STRIDE_H, tw / STRIDE_W, K, OH, OW)]
                     * (float)w[CS_NCHW(k0 + kk, cc, r, s, cpg, R, S)];
            }
        }
    }
    CS_EPI_STORE(epi, dx, index, c, acc);
}

/* dw[k, c, r, s] = sum over n, oh, ow of dy[n, k, oh, ow] * x[n, g*C/G + c, ih, iw]. */
__kernel void naive_bwd_weights(__global const real *x, __global real *dw,
                                __global const real *dy, CS_CONV_PARAMS CS_EPI_ARGS)
{
    CS_EPI_VALUES(epi, 0);
    const int cpg = C / G;
    const size_t index = get_global_id(0);
    if (index >= (size_t)K * cpg * R * S)
        return;
    const int s = index % S;
    const int r = (index / S) % R;
    const int cc = (index / ((size_t)S * R)) % cpg;
    const int k = index / ((size_t)S * R * cpg);
    const int c = (k / (K / G)) * cpg + cc;
    float acc = 0.0f;
    for (int n = 0; n < N; ++n) {
        __global const real *plane = x + CS_NCHW(n, c, 0, 0, C, H, W);
        for (int oh = 0; oh < OH; ++oh) {
            const int ih = oh * STRIDE_H - PAD_T + r * DIL_H;
            for (int ow = 0; ow < OW; ++ow) {
                const int iw = ow * STRIDE_W - PAD_L + s * DIL_W;
                acc += (float)dy[CS_NCHW(n, k, oh, ow, K, OH, OW)] * cs_padded_load(plane, ih, iw, H, W);
            }
        }
    }
    CS_EPI_STORE(epi, dw, index, k, acc);
}
