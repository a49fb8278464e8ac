/* pixels.cl: the strided pixels of channels-last (NHWC) images as a matrix, and back, for
 * gemm.Gemm1x1 on strided NHWC problems (1x1 filter, no padding; channels_last.py).
 *
 * Output pixel (oh, ow) reads input pixel (oh * STRIDE_H, ow * STRIDE_W), every channel. For the
 * images of one launch the pixel matrix, at rows + rows_off with row pitch ldr >= C, is
 *   rows[(n_local * OH + oh) * OW + ow][c] = x[n][oh * STRIDE_H][ow * STRIDE_W][c],   c < C,
 * the (images * OH * OW) x C matrix whose product with W^T is y (gemm.cl, TRANS_B = 1).
 *   gather_pixels   writes it from x;
 *   scatter_pixels  writes every element of dx from it, its adjoint: the element of the pixel's
 *                   row where the convolution reads the pixel, else 0.
 *
 * Tensors: x and dx are packed NHWC; image n_local of a launch starts at
 * x + x_off + n_local * H * W * C (dx + dx_off likewise).
 *
 * Kernels:
 *   gather_pixels(const global real *x, global real *rows, CS_CONV_PARAMS,
 *                 int x_off, int rows_off, int ldr)
 *     global size = (C, OH * OW, images), each rounded up to a multiple of the local size
 *   scatter_pixels(const global real *rows, global real *dx, CS_CONV_PARAMS,
 *                  int rows_off, int ldr, int dx_off)
 *     global size = (C, H * W, images), rounded up likewise
 *   CS_CONV_PARAMS (convsolve.h): the convolution's sizes in that order; C, H, W, OH, OW and the
 *   strides are read. One work-item per element, dimension 0 along the channels, which are
 *   contiguous in memory on both sides (PoCL vectorises the work-group's loop along it).
 *   local size = any; work-items past the sizes do nothing.
 *
 * Defines read: CS_PRECISION via convsolve.h (`real`). No tunables.
 */
#include "convsolve.h"

__kernel void gather_pixels(const __global real *restrict x, __global real *restrict rows,
                            CS_CONV_PARAMS, const int x_off, const int rows_off, const int ldr)
{
    const int c = get_global_id(0);
    const int p = get_global_id(1); /* oh * OW + ow */
    const int n = get_global_id(2);
    if (c >= C || p >= OH * OW)
        return;
    const int ih = (p / OW) * STRIDE_H, iw = (p % OW) * STRIDE_W;
    rows[rows_off + ((size_t)n * OH * OW + p) * ldr + c] =
        x[x_off + (((size_t)n * H + ih) * W + iw) * C + c];
}

__kernel void scatter_pixels(const __global real *restrict rows, __global real *restrict dx,
                             CS_CONV_PARAMS, const int rows_off, const int ldr, const int dx_off)
{
    const int c = get_global_id(0);
    const int p = get_global_id(1); /* ih * W + iw */
    const int n = get_global_id(2);
    if (c >= C || p >= H * W)
        return;
    const int ih = p / W, iw = p % W;
    const int oh = ih / STRIDE_H, ow = iw / STRIDE_W;
    const bool read = ih % STRIDE_H == 0 && iw % STRIDE_W == 0 && oh < OH && ow < OW;
    dx[dx_off + ((size_t)n * H * W + p) * C + c] =
        read ? rows[rows_off + (((size_t)n * OH + oh) * OW + ow) * ldr + c] : (real)0;
}
