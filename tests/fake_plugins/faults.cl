/* faults.cl: kernels that plant faults into otherwise correct test solvers.
 * scribble: writes one 32-bit word per work-item into the workspace.
 * nudge:    adds `amount` to buffer[index]: an output made wrong, an input modified, a word
 *           written past an input (index: its size), or runs that differ (a new amount each).
 * spoil:    sets every element of each run of `span` elements of y to NaN when one of them is
 *           not finite (one work-item per run): non-finite values spread over whole planes or
 *           over the whole output.
 * spin:     a kernel that never finishes.
 * skip_padding_fwd: naive forward that skips padded taps instead of multiplying their zeros, so
 *           an inf weight meeting the padding gives inf where the reference gives NaN. */
#include "convsolve.h"

__kernel void scribble(__global uint *scratch) { scratch[get_global_id(0)] = 0x12345678u; }
__kernel void nudge(__global float *buffer, const ulong index, const float amount)
{
    buffer[index] += amount;
}

__kernel void spoil(__global float *y, const uint span)
{
    __global float *run = y + get_global_id(0) * span;
    bool finite = true;
    for (uint i = 0; i < span; ++i)
        finite = finite && isfinite(run[i]);
    for (uint i = 0; !finite && i < span; ++i)
        run[i] = NAN;
}

__kernel void skip_padding_fwd(__global const float *x, __global const float *w, __global float *y,
                               CS_CONV_PARAMS)
{
    const size_t index = get_global_id(0);
    if (index >= (size_t)N * K * OH * OW)
        return;
    const int ow = index % OW, oh = (index / OW) % OH, k = (index / ((size_t)OW * OH)) % K;
    const int n = index / ((size_t)OW * OH * K), cpg = C / G, c0 = (k / (K / G)) * cpg;
    float acc = 0.0f;
    for (int c = 0; c < cpg; ++c)
        for (int r = 0; r < R; ++r)
            for (int s = 0; s < S; ++s) {
                const int ih = oh * STRIDE_H - PAD_T + r * DIL_H, iw = ow * STRIDE_W - PAD_L + s * DIL_W;
                if (ih >= 0 && ih < H && iw >= 0 && iw < W)
                    acc += x[CS_NCHW(n, c0 + c, ih, iw, C, H, W)] * w[CS_NCHW(k, c, r, s, cpg, R, S)];
            }
    y[index] = acc;
}

/* spin: never returns, whatever y holds (NaN, as check_solver fills it, included). */
__kernel void spin(__global volatile float *y)
{
    for (;;)
        y[0] += 1.0f;
}
