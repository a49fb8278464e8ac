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
#define COL2IM_TW 1 /* consecutive input columns (iw) per work-item: 1 suits GPUs, 16-64 CPUs */
#endif
#include "unfold_rows.cl" /* col2im_blocks, col2im_row */

/* The output row whose filter row r reaches input row ih (oh * STRIDE_H - PAD_T + r * DIL_H ==
 * ih), or -1 where none does; -2 where none does for r or any later row (th falls with r). */
static inline int col2im_row_of(const int ih, const int r, const int pad_t, const int dil_h,
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

    int va, vb; /* the columns summed in vectors */
    col2im_blocks(iw0, nw, PAD_L, DIL_W, S, STRIDE_W, OW, &va, &vb);
    real sum[COL2IM_TW];
    for (int t = 0; t < COL2IM_TW; ++t)
        sum[t] = (real)0;
    /* Taps in a fixed order (r, then s) in both loops: deterministic, no atomics, the same
     * sums whichever loop a column takes. */
    for (int r = 0, oh; r < R && (oh = col2im_row_of(ih, r, PAD_T, DIL_H, STRIDE_H, OH)) != -2; ++r) {
        if (oh < 0)
            continue;
        for (int s = 0; s < S; ++s)
            col2im_edges(sum, cm + (size_t)(r * S + s) * ldcol + oh * OW, iw0 + PAD_L - s * DIL_W,
                         STRIDE_W, OW, nw, va, vb);
    }
#if COL2IM_TW >= 16
    for (int tb = va; tb < vb; tb += 16) {
        real16 acc = (real16)0;
        real8 even = (real8)0, odd = (real8)0;
        for (int r = 0, oh; r < R && (oh = col2im_row_of(ih, r, PAD_T, DIL_H, STRIDE_H, OH)) != -2;
             ++r) {
            if (oh < 0)
                continue;
            for (int s = 0; s < S; ++s)
                col2im_block_tap(&acc, &even, &odd, cm + (size_t)(r * S + s) * ldcol + oh * OW,
                                 iw0 + tb + PAD_L - s * DIL_W, STRIDE_W);
        }
        col2im_block_sums(sum + tb, acc, even, odd, STRIDE_W);
    }
#endif
    const int k = g * cg + cl;
    const size_t at = dx_off + ((size_t)n * C + k) * H * W + (size_t)ih * W + iw0;
    CS_EPI_VALUES(epi, 0);
    for (int t = 0; t < nw; ++t)
        CS_EPI_STORE(epi, dx, at + t, k, sum[t]);
}
