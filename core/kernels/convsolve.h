/* convsolve.h: OpenCL helpers shared by every solver's kernels.
 *
 * On the include path of every build made through Handle.build (-I), so a kernel file says
 * `#include "convsolve.h"`. Everything here carries the CS_ prefix.
 *
 * Defines read:
 *   CS_PRECISION  32 (float, the default) or 16 (half, needs cl_khr_fp16); selects `real`
 *                 (and its vectors `real8`, `real16`).
 */
#ifndef CONVSOLVE_H
#define CONVSOLVE_H

#ifndef CS_PRECISION
#define CS_PRECISION 32  /* element type of tensors: 32 = float, 16 = half */
#endif

#if CS_PRECISION == 16
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
typedef half real;
typedef half8 real8;
typedef half16 real16;
#else
typedef float real;
typedef float8 real8;
typedef float16 real16;
#endif

/* Ceiling of a / b for non-negative integers. */
#define CS_DIV_UP(a, b) (((a) + (b) - 1) / (b))

/* Floor division that is correct for negative numerators (b > 0). */
#define CS_FLOOR_DIV(a, b) (((a) >= 0) ? ((a) / (b)) : -(((b) - 1 - (a)) / (b)))

/* Packed NCHW offset of element (n, c, h, w) of a tensor with C channels and H x W pixels. */
#define CS_NCHW(n, c, h, w, C, H, W) \
    ((((size_t)(n) * (C) + (c)) * (H) + (h)) * (size_t)(W) + (w))

/* x[ih, iw] of one H x W channel plane, or 0 where (ih, iw) lies in the zero padding.  Padding
 * takes part in the products like any other element (0 * inf = NaN), the non-finite semantics
 * every solver shares (docs/hooks.md); a kernel that skips padded taps instead breaks them. */
inline float cs_padded_load(__global const real *plane, int ih, int iw, int H, int W)
{
    return (ih >= 0 && ih < H && iw >= 0 && iw < W) ? (float)plane[(size_t)ih * W + iw] : 0.0f;
}

/* The problem's sizes as kernel parameters, in the order Problem.kernel_args() passes them, for
 * dynamic kernels (one build serves every problem).  Bottom/right padding is implied by OH, OW. */
#define CS_CONV_PARAMS                                                                  \
    const int N, const int C, const int H, const int W, const int K, const int R,       \
    const int S, const int OH, const int OW, const int G, const int PAD_T,              \
    const int PAD_L, const int STRIDE_H, const int STRIDE_W, const int DIL_H,           \
    const int DIL_W

#endif /* CONVSOLVE_H */
