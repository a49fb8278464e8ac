/* im2col.cl: forward convolution of one image as im2col into the scratch buffer, then a matrix
 * product of each group's weights with its rows (examples.Im2Col).
 *
 * Layouts: x NCHW, w KCRS (C = channels per group), y N K OH OW; all packed.  The columns of one
 * image, in scratch: C*R*S rows (C: every group's channels, row (c * R + r) * S + s) of OH*OW
 * floats, holding x[image, c, oh*SH - PT + r*DH, ow*SW - PL + s*DW], 0 in the zero padding.
 * Dynamic: the sizes are arguments (CS_CONV_PARAMS), after the buffers and the image index.
 * im2col:       a 1-D range of C*R*S*OH*OW work-items, one column element each.
 * columns_gemm: a 1-D range of K*OH*OW work-items, one output element each.
 *
 * Defines read: CS_PRECISION (convsolve.h).
 */
#include "convsolve.h"

__kernel void im2col(__global const real *x, __global float *columns, const int image,
                     CS_CONV_PARAMS)
{
    const size_t index = get_global_id(0);
    const int ow = index % OW, oh = (index / OW) % OH;
    const int s = (index / ((size_t)OH * OW)) % S, r = (index / ((size_t)OH * OW * S)) % R;
    const int c = index / ((size_t)OH * OW * S * R);
    columns[index] = cs_padded_load(x + CS_NCHW(image, c, 0, 0, C, H, W),
                                    oh * STRIDE_H - PAD_T + r * DIL_H,
                                    ow * STRIDE_W - PAD_L + s * DIL_W, H, W);
}

__kernel void columns_gemm(__global const float *columns, __global const real *w,
                           __global real *y, const int image, CS_CONV_PARAMS)
{
    const size_t index = get_global_id(0), pixels = (size_t)OH * OW;
    const int pixel = index % pixels, k = index / pixels;
    const int group_rows = C / G * R * S;   /* a group's rows: one filter's size */
    __global const float *rows = columns + (size_t)(k / (K / G)) * group_rows * pixels;
    float acc = 0.0f;
    for (int row = 0; row < group_rows; ++row)
        acc += (float)w[(size_t)k * group_rows + row] * rows[row * pixels + pixel];
    y[CS_NCHW(image, k, 0, 0, K, OH, OW) + pixel] = (real)acc;
}
