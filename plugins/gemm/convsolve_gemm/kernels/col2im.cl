/* col2im.cl: the adjoint of im2col.cl, folding column matrices back into NCHW images.
 *
 * With the column layout of im2col.cl (matrix of image n_local and group g at
 * col + col_off + n_local * image_stride + g * group_stride, shape [Cg * R * S][OH * OW], row
 * pitch ldcol), computes
 *   dx[n][g * Cg + cl][ih][iw] = sum over (r, s, oh, ow) with
 *       oh * STRIDE_H - PAD_T + r * DIL_H == ih  and  ow * STRIDE_W - PAD_L + s * DIL_W == iw
 *     of col[(cl * R + r) * S + s][oh * OW + ow]
 * (with CS_EPI: the backward epilogue of that sum, alpha * sum + beta * dx, convsolve_epilogue.h)
 * as a gather: one work-item per element of dx, summing in a fixed order (r, then s), so the
 * result is deterministic and needs no atomics. Backward data of a convolution is then
 * dcol = W[g]^T * dy[n][g] (gemm.cl with TRANS_A = 1) followed by this kernel.
 *
 * Tensors: dx is packed NCHW; image n_local of the launch starts at dx + dx_off + n_local*C*H*W.
 *
 * Kernel:
 *   col2im(const global real *col, global real *dx, CS_CONV_PARAMS,
 *          int col_off, int ldcol, int image_stride, int group_stride,
 *          int dx_off[, CS_EPILOGUE_PARAMS with CS_EPI])
 *   CS_CONV_PARAMS (convsolve.h) are the convolution's sizes as Problem.kernel_args() passes
 *   them; N and K are not read. The launch covers `images` images from dx_off on.
 *   global size = (H * CS_DIV_UP(W, COL2IM_TW), C / G, images * G)
 *   local size  = any (NULL is fine)
 *   Each work-item writes COL2IM_TW consecutive iw of one (ih, channel, image).
 *
 * Defines read: COL2IM_TW (tunable); the epilogue's (convsolve_epilogue.h); CS_PRECISION via
 * convsolve.h (`real`).
 */
#include "convsolve_epilogue.h"

#ifndef COL2IM_TW
#define COL2IM_TW 1 /* consecutive input columns (iw) per work-item: 1 suits GPUs, 16-32 CPUs */
#endif

/* The output row whose filter row r reaches input row ih (oh * STRIDE_H - PAD_T + r * DIL_H ==
 * ih), or -1 where none does; -2 where none does for r or any later row (th falls with r). */
static inline int col2im_row(const int ih, const int r, const int pad_t, const int dil_h,
                             const int stride_h, const int oh_count)
{
    const int th = ih + pad_t - r * dil_h;
    if (th < 0)
        return -2;
    return (th % stride_h != 0 || th / stride_h >= oh_count) ? -1 : th / stride_h;
}

__kernel void col2im(const __global real *restrict col, __global real *restrict dx,
                     CS_CONV_PARAMS, const int col_off, const int ldcol, const int image_stride,
                     const int group_stride, const int dx_off CS_EPI_ARGS)
{
    const int wb = CS_DIV_UP(W, COL2IM_TW);
    const int ih = get_global_id(0) / wb;
    const int iw0 = (get_global_id(0) % wb) * COL2IM_TW;
    const int cl = get_global_id(1);
    const int b = get_global_id(2); /* n_local * G + g */
    if (ih >= H || cl >= C / G)
        return;
    const int nw = min(COL2IM_TW, W - iw0);
    const int cg = C / G;
    const int n = b / G, g = b % G;
    const __global real *cm = col + col_off + (size_t)n * image_stride + (size_t)g * group_stride +
                              (size_t)cl * R * S * ldcol;

    real sum[COL2IM_TW];
    /* Columns [va, vb) are summed 16 at a time below; the others here, one at a time. */
    int va = 0, vb = 0;
#if COL2IM_TW >= 16
    if (STRIDE_W <= 2) {
        /* Blocks of 16 columns whose every tap reads inside the column rows, without a bounds
         * check: from the first whose leftmost tap is at ow >= 0 while the rightmost is < OW. */
        while (va + 16 <= nw && iw0 + va + PAD_L - (S - 1) * DIL_W < 0)
            va += 16;
        vb = va;
        while (vb + 16 <= nw && (iw0 + vb + 15 + PAD_L) / STRIDE_W < OW)
            vb += 16;
    }
#endif
    for (int t = 0; t < COL2IM_TW; ++t)
        sum[t] = (real)0;
    /* Taps in a fixed order (r, then s), in both loops: deterministic, no atomics, and the same
     * sums whichever loop a column takes. */
    for (int r = 0, oh; r < R && (oh = col2im_row(ih, r, PAD_T, DIL_H, STRIDE_H, OH)) != -2; ++r) {
        if (oh < 0)
            continue;
        for (int s = 0; s < S; ++s) {
            const __global real *crow = cm + (size_t)(r * S + s) * ldcol + oh * OW;
            const int tw0 = iw0 + PAD_L - s * DIL_W; /* = ow * STRIDE_W for t = 0 */
            for (int t = 0; t < nw; ++t) {
                if (t == va && vb > va) { /* skip the vector blocks */
                    t = vb - 1;
                    continue;
                }
                const int tw = tw0 + t;
                if (tw >= 0 && tw % STRIDE_W == 0 && tw / STRIDE_W < OW)
                    sum[t] += crow[tw / STRIDE_W];
            }
        }
    }
#if COL2IM_TW >= 16
    /* Stride 1: the 16 columns of a block read 16 consecutive col entries per tap.  Stride 2: a
     * tap reaches either the even or the odd columns of a block, from 8 consecutive entries. */
    for (int tb = va; tb < vb; tb += 16) {
        real16 acc = (real16)0;
        real8 even = (real8)0, odd = (real8)0;
        for (int r = 0, oh; r < R && (oh = col2im_row(ih, r, PAD_T, DIL_H, STRIDE_H, OH)) != -2;
             ++r) {
            if (oh < 0)
                continue;
            for (int s = 0; s < S; ++s) {
                const __global real *crow = cm + (size_t)(r * S + s) * ldcol + oh * OW;
                const int tw = iw0 + tb + PAD_L - s * DIL_W; /* >= 0 in a vector block */
                if (STRIDE_W == 1)
                    acc += vload16(0, crow + tw);
                else if (tw % 2 == 0)
                    even += vload8(0, crow + tw / 2);
                else
                    odd += vload8(0, crow + (tw + 1) / 2);
            }
        }
        if (STRIDE_W == 2)
            acc = shuffle2(even, odd, (uint16)(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15));
        vstore16(acc, 0, sum + tb);
    }
#endif
    const int k = g * cg + cl;
    const size_t at = dx_off + ((size_t)n * C + k) * H * W + (size_t)ih * W + iw0;
    CS_EPI_VALUES(epi, 0);
    for (int t = 0; t < nw; ++t)
        CS_EPI_STORE(epi, dx, at + t, k, sum[t]);
}
