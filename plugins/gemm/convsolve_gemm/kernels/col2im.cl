/* col2im.cl: the adjoint of im2col.cl, folding column matrices back into NCHW images.
 *
 * With the column layout of im2col.cl (matrix of batch index b = n_local * groups + g at
 * col + col_off + b * col_stride, shape [Cg * R * S][OH * OW], row pitch ldcol), computes
 *   dx[n][g * Cg + cl][ih][iw] = alpha * sum over (r, s, oh, ow) with
 *       oh * stride_h - pad_top  + r * dil_h == ih  and  ow * stride_w - pad_left + s * dil_w == iw
 *     of col[(cl * R + r) * S + s][oh * OW + ow]
 *   + beta * dx[n][g * Cg + cl][ih][iw]          (beta == 0 does not read dx)
 * as a gather: one work-item per element of dx, summing in a fixed order (r, then s), so the
 * result is deterministic and needs no atomics. Backward data of a convolution is then
 * dcol = W[g]^T * dy[n][g] (gemm.cl with TRANS_A = 1) followed by this kernel.
 *
 * Tensors: dx is packed NCHW; image n_local of the launch starts at dx + dx_off + n_local*C*H*W.
 *
 * Kernel:
 *   col2im(const global real *col, int col_off, int ldcol, int col_stride,
 *          global real *dx, int dx_off, real alpha, real beta,
 *          int C, int H, int W, int OH, int OW, int R, int S,
 *          int stride_h, int stride_w, int pad_top, int pad_left, int dil_h, int dil_w,
 *          int groups)
 *   global size = (H * W, C / groups, images * groups)    (dimension 0 may be rounded up)
 *   local size  = any (NULL is fine)
 *
 * Defines read: none besides CS_PRECISION via convsolve.h (`real`).
 */
#include "convsolve.h"

__kernel void col2im(const __global real *restrict col, const int col_off, const int ldcol,
                     const int col_stride, __global real *restrict dx, const int dx_off,
                     const real alpha, const real beta, const int C, const int H, const int W,
                     const int OH, const int OW, const int R, const int S,
                     const int stride_h, const int stride_w, const int pad_top,
                     const int pad_left, const int dil_h, const int dil_w, const int groups)
{
    const int hw = get_global_id(0);
    const int cl = get_global_id(1);
    const int b = get_global_id(2); /* n_local * groups + g */
    if (hw >= H * W)
        return;
    const int ih = hw / W, iw = hw % W;
    const int cg = C / groups;
    const int n = b / groups, g = b % groups;
    const __global real *cm = col + col_off + (size_t)b * col_stride + (size_t)cl * R * S * ldcol;

    real sum = (real)0;
    for (int r = 0; r < R; ++r) {
        const int th = ih + pad_top - r * dil_h; /* = oh * stride_h */
        if (th < 0)
            break; /* th only decreases with r */
        if (th % stride_h != 0)
            continue;
        const int oh = th / stride_h;
        if (oh >= OH)
            continue;
        for (int s = 0; s < S; ++s) {
            const int tw = iw + pad_left - s * dil_w; /* = ow * stride_w */
            if (tw < 0)
                break;
            if (tw % stride_w != 0)
                continue;
            const int ow = tw / stride_w;
            if (ow < OW)
                sum += cm[(size_t)(r * S + s) * ldcol + oh * OW + ow];
        }
    }
    __global real *d = dx + dx_off + ((size_t)n * C + g * cg + cl) * H * W + hw;
    *d = beta != (real)0 ? alpha * sum + beta * *d : alpha * sum;
}
