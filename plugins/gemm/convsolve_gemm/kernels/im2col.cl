/* im2col.cl: unfolds NCHW images into per-group column matrices for the GEMM solvers.
 *
 * For image n and group g (Cg = C / G input channels per group), the column matrix is
 *   col[(cl * R + r) * S + s][oh * OW + ow] = x[n][g * Cg + cl][ih][iw]   (0 outside x)
 *   ih = oh * STRIDE_H - PAD_T + r * DIL_H,   iw = ow * STRIDE_W - PAD_L + s * DIL_W
 * Shape [Cg * R * S][OH * OW], row-major, row pitch ldcol >= OH * OW (pad it so that
 * ldcol * 4 bytes is not a multiple of 4 KiB: gemm.cl on CPUs slows down 2x on such pitches).
 * The matrix of image n_local and group g starts at
 *   col + col_off + n_local * image_stride + g * group_stride,
 * so the forward GEMM of every group of an image is one gemm.cl launch with
 *   op(A) = W[g] (Kg x CgRS), op(B) = col (CgRS x OH*OW, ldb = ldcol), C = y[n][g] (ldc = OH*OW).
 * Stacked images (image_stride = G * group_stride) serve forward and backward data;
 * images side by side (image_stride = OH * OW, ldcol >= images * OH * OW) give one matrix per
 * group whose rows run over every image, the reduction of backward weights.
 * Bottom/right padding is implied: OH, OW are arguments, taps that fall past H, W read 0.
 *
 * Tensors: x is packed NCHW; image n_local of the launch starts at x + x_off + n_local * C*H*W.
 *
 * Kernel:
 *   im2col(const global real *x, global real *col, CS_CONV_PARAMS,
 *          int x_off, int col_off, int ldcol, int image_stride, int group_stride)
 *   CS_CONV_PARAMS (convsolve.h) are the convolution's sizes as Problem.kernel_args() passes
 *   them; N and K are not read. The launch covers `images` images from x_off on.
 *   global size = (CS_DIV_UP(OH, IM2COL_TH) * CS_DIV_UP(OW, IM2COL_TW), (C / G) * R * S,
 *                  images * G),  IM2COL_TH = max(1, IM2COL_TW / OW)
 *   local size  = any (NULL is fine)
 *   Each work-item writes IM2COL_TW consecutive ow of IM2COL_TH consecutive oh of one row of
 *   col: rows of OW shorter than IM2COL_TW are taken several at a time (on CPUs a work-item
 *   a 7-column row made the unfold of a 7x7 output take 4 GB/s).
 *
 * Defines read: IM2COL_TW (tunable); CS_PRECISION via convsolve.h (`real`).
 */
#include "convsolve.h"

#ifndef IM2COL_TW
#define IM2COL_TW 8 /* consecutive output columns (ow) per work-item: 1 suits GPUs, 8-64 CPUs */
#endif
#include "unfold_rows.cl" /* im2col_row */

__kernel void im2col(const __global real *restrict x, __global real *restrict col,
                     CS_CONV_PARAMS, const int x_off, const int col_off, const int ldcol,
                     const int image_stride, const int group_stride)
{
    const int th = max(1, IM2COL_TW / OW); /* IM2COL_TH */
    const int owb = CS_DIV_UP(OW, IM2COL_TW);
    const int oh0 = get_global_id(0) / owb * th;
    const int ow0 = (get_global_id(0) % owb) * IM2COL_TW;
    const int row = get_global_id(1); /* (cl * R + r) * S + s */
    const int b = get_global_id(2);   /* n_local * G + g */
    const int cg = C / G;
    if (oh0 >= OH || row >= cg * R * S)
        return;
    const int s = row % S;
    const int r = (row / S) % R;
    const int cl = row / (R * S);
    const int n = b / G, g = b % G;

    const __global real *xc = x + x_off + ((size_t)n * C + g * cg + cl) * H * W;
    __global real *out = col + col_off + (size_t)n * image_stride + (size_t)g * group_stride +
                         (size_t)row * ldcol + ow0;
    const int iw0 = ow0 * STRIDE_W - PAD_L + s * DIL_W;
    const int nw = min(IM2COL_TW, OW - ow0);
    for (int oh = oh0; oh < min(oh0 + th, OH); ++oh) {
        const int ih = oh * STRIDE_H - PAD_T + r * DIL_H;
        if (ih < 0 || ih >= H)
            for (int t = 0; t < nw; ++t)
                out[oh * OW + t] = (real)0;
        else
            im2col_row(out + oh * OW, xc + ih * W, iw0, STRIDE_W, W, nw);
    }
}
