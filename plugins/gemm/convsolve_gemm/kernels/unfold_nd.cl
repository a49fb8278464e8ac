/* unfold_nd.cl: im2col.cl and col2im.cl for spatial rank 1 and 3 (NCW, NCDHW): channels-first
 * images unfolded into per-group column matrices for the GEMM solvers, and folded back.
 *
 * Every problem is 3-D here: a 1-D one has D = H = 1, Z = R = 1, pad 0, stride and dilation 1
 * in the depth and height dims.  For image n and group g (Cg = C / G input channels per group)
 * the column matrix is
 *   col[((cl * Z + z) * R + r) * S + s][(od * OH + oh) * OW + ow] = x[n][g * Cg + cl][id][ih][iw]
 *   id = od * STRIDE_D - PAD_F + z * DIL_D,  ih = oh * STRIDE_H - PAD_T + r * DIL_H,
 *   iw = ow * STRIDE_W - PAD_L + s * DIL_W                                   (0 outside x)
 * Shape [Cg * Z * R * S][OD * OH * OW], row-major, row pitch ldcol; the matrix of image n_local
 * and group g starts at col + col_off + n_local * image_stride + g * group_stride, as in
 * im2col.cl (stacked images, or side by side with image_stride = OD * OH * OW).  The far pads
 * are implied by OD, OH and OW.  col2im_nd is im2col_nd's adjoint, a gather: one work-item per
 * element of dx sums its taps in a fixed order (z, r, then s), deterministic, no atomics.  No
 * epilogue: the solvers' fused_stages is 0 for backward-data through these columns, and the
 * core's pass applies it (2-D runs im2col.cl and col2im.cl, which fuse it).
 *
 * Tensors: x / dx packed NCDHW (NCW: D = H = 1); image n_local of a launch starts at
 * x + x_off + n_local * C * D * H * W.
 *
 * Kernels:
 *   im2col_nd(const global real *x, global real *col, ND_CONV_PARAMS,
 *             int x_off, int col_off, int ldcol, int image_stride, int group_stride)
 *     global size = (OD * OH * CS_DIV_UP(OW, IM2COL_TW), Cg * Z * R * S, images * G)
 *     Each work-item writes IM2COL_TW consecutive ow of one (row, od, oh).
 *   col2im_nd(const global real *col, global real *dx, ND_CONV_PARAMS,
 *             int col_off, int ldcol, int image_stride, int group_stride, int dx_off)
 *     global size = (D * H * CS_DIV_UP(W, COL2IM_TW), Cg, images * G)
 *     Each work-item writes COL2IM_TW consecutive iw of one (id, ih, channel, image).
 *   local size = any (work-items past the sizes return at once); every size is an argument,
 *   so one build serves every problem.
 *
 * Defines read: IM2COL_TW, COL2IM_TW (tunables, as in im2col.cl and col2im.cl); CS_PRECISION
 * via convsolve.h (`real`).
 */
#include "convsolve.h"

#ifndef IM2COL_TW
#define IM2COL_TW 8 /* consecutive output columns (ow) per work-item: 1 suits GPUs, 8-64 CPUs */
#endif
#ifndef COL2IM_TW
#define COL2IM_TW 1 /* consecutive input columns (iw) per work-item: 1 suits GPUs, 16-64 CPUs */
#endif
#include "unfold_rows.cl" /* im2col_row, col2im_blocks, col2im_lanes, col2im_block_tap, _sums */

/* The convolution's sizes, outermost dim first (conv_layout.unfold_args passes them). */
#define ND_CONV_PARAMS                                                                         \
    const int C, const int D, const int H, const int W, const int Z, const int R, const int S,  \
    const int OD, const int OH, const int OW, const int G, const int PAD_F, const int PAD_T,   \
    const int PAD_L, const int STRIDE_D, const int STRIDE_H, const int STRIDE_W,              \
    const int DIL_D, const int DIL_H, const int DIL_W

__kernel void im2col_nd(const __global real *restrict x, __global real *restrict col,
                        ND_CONV_PARAMS, const int x_off, const int col_off, const int ldcol,
                        const int image_stride, const int group_stride)
{
    const int owb = CS_DIV_UP(OW, IM2COL_TW);
    const int odh = get_global_id(0) / owb; /* od * OH + oh */
    const int ow0 = (get_global_id(0) % owb) * IM2COL_TW;
    const int row = get_global_id(1);       /* ((cl * Z + z) * R + r) * S + s */
    const int b = get_global_id(2);         /* n_local * G + g */
    const int cg = C / G;
    if (odh >= OD * OH || row >= cg * Z * R * S)
        return;
    const int s = row % S;
    const int r = (row / S) % R;
    const int z = (row / (R * S)) % Z;
    const int cl = row / (Z * R * S);
    const int od = odh / OH, oh = odh % OH;
    const int n = b / G, g = b % G;

    __global real *out = col + col_off + (size_t)n * image_stride + (size_t)g * group_stride +
                         (size_t)row * ldcol + (size_t)odh * OW + ow0;
    const int id = od * STRIDE_D - PAD_F + z * DIL_D;
    const int ih = oh * STRIDE_H - PAD_T + r * DIL_H;
    const int iw0 = ow0 * STRIDE_W - PAD_L + s * DIL_W;
    const int nw = min(IM2COL_TW, OW - ow0);
    if (id < 0 || id >= D || ih < 0 || ih >= H) {
        for (int t = 0; t < nw; ++t)
            out[t] = (real)0;
        return;
    }
    const __global real *xr = x + x_off + (((size_t)n * C + g * cg + cl) * D + id) * H * W +
                              (size_t)ih * W;
    im2col_row(out, xr, iw0, STRIDE_W, W, nw);
}

/* The output index o with o * stride - pad + tap * dil == i, or -1 where there is none. */
inline int nd_window(int i, int tap, int pad, int stride, int dil, int out)
{
    const int t = i + pad - tap * dil; /* = o * stride */
    return (t >= 0 && t % stride == 0 && t / stride < out) ? t / stride : -1;
}

__kernel void col2im_nd(const __global real *restrict col, __global real *restrict dx,
                        ND_CONV_PARAMS, const int col_off, const int ldcol,
                        const int image_stride, const int group_stride, const int dx_off)
{
    const int wb = CS_DIV_UP(W, COL2IM_TW);
    const int idh = get_global_id(0) / wb; /* id * H + ih */
    const int iw0 = (get_global_id(0) % wb) * COL2IM_TW;
    const int cl = get_global_id(1);
    const int b = get_global_id(2);        /* n_local * G + g */
    const int cg = C / G;
    if (idh >= D * H || cl >= cg)
        return;
    const int id = idh / H, ih = idh % H;
    const int nw = min(COL2IM_TW, W - iw0);
    const int n = b / G, g = b % G;
    const __global real *cm = col + col_off + (size_t)n * image_stride +
                              (size_t)g * group_stride + (size_t)cl * Z * R * S * ldcol;

    int va, vb; /* the columns summed in vectors */
    col2im_blocks(iw0, nw, PAD_L, DIL_W, S, STRIDE_W, OW, &va, &vb);
    real sum[COL2IM_TW];
    for (int t = 0; t < COL2IM_TW; ++t)
        sum[t] = (real)0;
    /* Taps in a fixed order (z, r, then s) in both loops: deterministic, no atomics, the same
     * sums whichever loop a column takes. */
    for (int z = 0; z < Z; ++z) {
        const int od = nd_window(id, z, PAD_F, STRIDE_D, DIL_D, OD);
        for (int r = 0; r < R && od >= 0; ++r) {
            const int oh = nd_window(ih, r, PAD_T, STRIDE_H, DIL_H, OH);
            for (int s = 0; s < S && oh >= 0; ++s)
                col2im_edges(sum, cm + (size_t)((z * R + r) * S + s) * ldcol +
                             ((size_t)od * OH + oh) * OW, iw0 + PAD_L - s * DIL_W, STRIDE_W, OW,
                             nw, va, vb);
        }
    }
#if COL2IM_TW >= 16
    for (int tb = va; tb < vb; tb += 16) {
        real16 acc = (real16)0;
        real8 even = (real8)0, odd = (real8)0;
        for (int z = 0; z < Z; ++z) {
            const int od = nd_window(id, z, PAD_F, STRIDE_D, DIL_D, OD);
            for (int r = 0; r < R && od >= 0; ++r) {
                const int oh = nd_window(ih, r, PAD_T, STRIDE_H, DIL_H, OH);
                for (int s = 0; s < S && oh >= 0; ++s)
                    col2im_block_tap(&acc, &even, &odd, cm + (size_t)((z * R + r) * S + s) * ldcol +
                                     ((size_t)od * OH + oh) * OW, iw0 + tb + PAD_L - s * DIL_W,
                                     STRIDE_W);
            }
        }
        col2im_block_sums(sum + tb, acc, even, odd, STRIDE_W);
    }
#endif
    __global real *out = dx + dx_off + (((size_t)n * C + g * cg + cl) * D * H + idh) * W + iw0;
    for (int t = 0; t < nw; ++t)
        out[t] = sum[t];
}
