/* lies.cl: the kernel of a solver whose is_applicable accepts more than it computes.
 * pointwise_unstrided_fwd: a 1x1 forward convolution (groups 1, no padding) that ignores the
 *     stride: it lays the output out as if it were H x W, as with stride 1, so with stride u x v
 *     it writes u * v times the output's size, far past y when the input is large (on PoCL the
 *     process then dies: SIGSEGV, or "double free or corruption"). Never run it in a test
 *     process: check_solver(..., isolate=True) or sanitize=True only.
 *     Launch: N * K * H * W work-items. */
#include "convsolve.h"

__kernel void pointwise_unstrided_fwd(__global const float *x, __global const float *w,
                                      __global float *y, CS_CONV_PARAMS)
{
    const size_t index = get_global_id(0);
    if (index >= (size_t)N * K * H * W)
        return;
    const size_t pixel = index % ((size_t)H * W);
    const int k = (index / ((size_t)H * W)) % K;
    const int n = index / ((size_t)H * W * K);
    float acc = 0.0f;
    for (int c = 0; c < C; ++c)
        acc += x[CS_NCHW(n, c, 0, 0, C, H, W) + pixel] * w[(size_t)k * C + c];
    y[index] = acc;
}
