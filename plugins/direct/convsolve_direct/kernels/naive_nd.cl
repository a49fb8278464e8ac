/* naive_nd.cl: direct convolution of spatial rank 1, 2 or 3 in any layout, one work-item per
 * output element, for all three directions.
 *
 * Every problem is 3-D: a 1-D or 2-D one has depth (and height) 1 there, with filter size 1,
 * pad 0, stride and dilation 1.  Each tensor is addressed through its element strides
 * (ND_STRIDES: batch or output channel, channel, depth, height, width), so one build serves
 * NCW / NWC, NCHW / NHWC and NCDHW / NDHWC, chosen per tensor.  Logical shapes: x is
 * N x C x D x H x W, w is K x C/G x Z x R x S, y is N x K x OD x OH x OW.  Groups: output
 * channel k belongs to group k / (K/G) and reads input channels [g*C/G, (g+1)*C/G).  Padding:
 * PAD_F / PAD_T / PAD_L shift the window; the far pads are implied by OD, OH and OW; padded
 * elements are zeros that take part in the products, so non-finite values propagate exactly as
 * in the reference.  Accumulation in float, in naive.cl's order (channels, then taps).
 * Dynamic: every size and stride is a kernel argument, so one build serves every problem.
 * Launch: a 1-D range of at least the output's element count, any local size; work-items past
 * the end return at once.  With CS_EPI each kernel stores the epilogue with its element
 * (convsolve_epilogue.h's CS_EPI_STORE: the channel is the work-item's own k or c, z and the
 * prior output read at the element's offset, so any layout of the output serves).
 *
 * Defines read: CS_PRECISION (convsolve.h), the epilogue's (CS_EPI...).
 */
#include "convsolve_epilogue.h"
#include "nd_common.cl"   /* ND_SIZES, nd_window */

/* One tensor's element strides, named with the prefix P: P##N (batch or output channel), P##C,
 * P##D, P##H, P##W. */
#define ND_STRIDES(P) const int P##N, const int P##C, const int P##D, const int P##H, const int P##W

/* The offset of logical element (n, c, d, h, w) of the tensor whose strides have prefix P. */
#define ND_AT(P, n, c, d, h, w)                                                      \
    ((size_t)(n) * P##N + (size_t)(c) * P##C + (size_t)(d) * P##D + (size_t)(h) * P##H \
     + (size_t)(w) * P##W)

/* x at (n, c, d, h, w), or 0 where (d, h, w) lies in the zero padding. */
inline float nd_padded_load(__global const real *x, int n, int c, int d, int h, int w, int D,
                            int H, int W, ND_STRIDES(XS_))
{
    const bool inside = d >= 0 && d < D && h >= 0 && h < H && w >= 0 && w < W;
    return inside ? (float)x[ND_AT(XS_, n, c, d, h, w)] : 0.0f;
}

/* y[n, k, od, oh, ow] = sum over c, z, r, s of
 *     x[n, g*C/G + c, od*SD - PF + z*DD, oh*SH - PT + r*DH, ow*SW - PL + s*DW] * w[k, c, z, r, s] */
__kernel void naive_nd_fwd(__global const real *x, __global const real *w, __global real *y,
                           ND_SIZES, ND_STRIDES(XS_), ND_STRIDES(WS_),
                           ND_STRIDES(YS_) CS_EPI_ARGS)
{
    CS_EPI_VALUES(epi, 0);
    const size_t index = get_global_id(0);
    if (index >= (size_t)N * K * OD * OH * OW)
        return;
    const int ow = index % OW;
    const int oh = (index / OW) % OH;
    const int od = (index / ((size_t)OW * OH)) % OD;
    const int k = (index / ((size_t)OW * OH * OD)) % K;
    const int n = index / ((size_t)OW * OH * OD * K);
    const int cpg = C / G;
    const int c0 = (k / (K / G)) * cpg;
    float acc = 0.0f;
    for (int c = 0; c < cpg; ++c)
        for (int z = 0; z < Z; ++z) {
            const int id = od * STRIDE_D - PAD_F + z * DIL_D;
            for (int r = 0; r < R; ++r) {
                const int ih = oh * STRIDE_H - PAD_T + r * DIL_H;
                for (int s = 0; s < S; ++s) {
                    const int iw = ow * STRIDE_W - PAD_L + s * DIL_W;
                    acc += nd_padded_load(x, n, c0 + c, id, ih, iw, D, H, W, XS_N, XS_C, XS_D,
                                          XS_H, XS_W)
                         * (float)w[ND_AT(WS_, k, c, z, r, s)];
                }
            }
        }
    CS_EPI_STORE(epi, y, ND_AT(YS_, n, k, od, oh, ow), k, acc);
}

/* dx[n, c, d, h, w] = sum over the k of c's group and the taps (z, r, s) whose window covers
 * (d, h, w). */
__kernel void naive_nd_bwd_data(__global real *dx, __global const real *w,
                                __global const real *dy, ND_SIZES, ND_STRIDES(XS_),
                                ND_STRIDES(WS_), ND_STRIDES(YS_) CS_EPI_ARGS)
{
    CS_EPI_VALUES(epi, 0);
    const size_t index = get_global_id(0);
    if (index >= (size_t)N * C * D * H * W)
        return;
    const int iw = index % W;
    const int ih = (index / W) % H;
    const int id = (index / ((size_t)W * H)) % D;
    const int c = (index / ((size_t)W * H * D)) % C;
    const int n = index / ((size_t)W * H * D * C);
    const int cpg = C / G, kpg = K / G;
    const int k0 = (c / cpg) * kpg, cc = c % cpg;
    float acc = 0.0f;
    for (int kk = 0; kk < kpg; ++kk)
        for (int z = 0; z < Z; ++z) {
            const int od = nd_window(id, z, PAD_F, STRIDE_D, DIL_D, OD);
            if (od < 0)
                continue;
            for (int r = 0; r < R; ++r) {
                const int oh = nd_window(ih, r, PAD_T, STRIDE_H, DIL_H, OH);
                if (oh < 0)
                    continue;
                for (int s = 0; s < S; ++s) {
                    const int ow = nd_window(iw, s, PAD_L, STRIDE_W, DIL_W, OW);
                    if (ow < 0)
                        continue;
                    acc += (float)dy[ND_AT(YS_, n, k0 + kk, od, oh, ow)]
                         * (float)w[ND_AT(WS_, k0 + kk, cc, z, r, s)];
                }
            }
        }
    CS_EPI_STORE(epi, dx, ND_AT(XS_, n, c, id, ih, iw), c, acc);
}

/* dw[k, c, z, r, s] = sum over n, od, oh, ow of dy[n, k, od, oh, ow] * x[n, g*C/G + c, ...]. */
__kernel void naive_nd_bwd_weights(__global const real *x, __global real *dw,
                                   __global const real *dy, ND_SIZES, ND_STRIDES(XS_),
                                   ND_STRIDES(WS_), ND_STRIDES(YS_) CS_EPI_ARGS)
{
    CS_EPI_VALUES(epi, 0);
    const int cpg = C / G;
    const size_t index = get_global_id(0);
    if (index >= (size_t)K * cpg * Z * R * S)
        return;
    const int s = index % S;
    const int r = (index / S) % R;
    const int z = (index / ((size_t)S * R)) % Z;
    const int cc = (index / ((size_t)S * R * Z)) % cpg;
    const int k = index / ((size_t)S * R * Z * cpg);
    const int c = (k / (K / G)) * cpg + cc;
    float acc = 0.0f;
    for (int n = 0; n < N; ++n)
        for (int od = 0; od < OD; ++od) {
            const int id = od * STRIDE_D - PAD_F + z * DIL_D;
            for (int oh = 0; oh < OH; ++oh) {
                const int ih = oh * STRIDE_H - PAD_T + r * DIL_H;
                for (int ow = 0; ow < OW; ++ow) {
                    const int iw = ow * STRIDE_W - PAD_L + s * DIL_W;
                    acc += (float)dy[ND_AT(YS_, n, k, od, oh, ow)]
                         * nd_padded_load(x, n, c, id, ih, iw, D, H, W, XS_N, XS_C, XS_D, XS_H,
                                          XS_W);
                }
            }
        }
    CS_EPI_STORE(epi, dw, ND_AT(WS_, k, cc, z, r, s), k, acc);
}
