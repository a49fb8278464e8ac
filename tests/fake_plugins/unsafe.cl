/* unsafe.cl: forward kernels with right results and a memory-safety fault that a sanitiser
 * (Oclgrind) or check_solver's guard zones see; on a real device, run them only through
 * check_solver, whose guard zone after each buffer takes their one stray element.
 * off_by_one_fwd:  the naive forward with the classic `>` for `>=` tail guard, launched over one
 *                  work-item more than the output has: that one reads x past its end and writes
 *                  y[N*K*OH*OW], one element past the output.
 * pairs_fwd:       the naive forward with two outputs per work-item over ceil(size / 2) work-items,
 *                  without a check of the second: on an odd output size, one element past y.
 * overread_fwd:    the naive forward reading input channels in fours, the weights of channels
 *                  past the group's zero: right results, but the last image's last channels
 *                  read up to 3 planes past the end of x (0 * whatever is there, unless NaN).
 * local_race_fwd:  the naive forward whose work-items all write their id to one __local int
 *                  before a barrier (a write-write data race), then read it back in a test that
 *                  every value passes. Launch: work-groups of 64, the range rounded up to them. */
#include "convsolve.h"

inline float naive_fwd_at(__global const float *x, __global const float *w, size_t index,
                          CS_CONV_PARAMS)
{
    const int ow = index % OW, oh = (index / OW) % OH, k = (index / ((size_t)OW * OH)) % K;
    const int n = index / ((size_t)OW * OH * K), cpg = C / G, c0 = (k / (K / G)) * cpg;
    float acc = 0.0f;
    for (int c = 0; c < cpg; ++c)
        for (int r = 0; r < R; ++r)
            for (int s = 0; s < S; ++s)
                acc += cs_padded_load(x + CS_NCHW(n, c0 + c, 0, 0, C, H, W),
                                      oh * STRIDE_H - PAD_T + r * DIL_H,
                                      ow * STRIDE_W - PAD_L + s * DIL_W, H, W)
                       * w[CS_NCHW(k, c, r, s, cpg, R, S)];
    return acc;
}

__kernel void off_by_one_fwd(__global const float *x, __global const float *w, __global float *y,
                             CS_CONV_PARAMS)
{
    const size_t index = get_global_id(0);
    if (index > (size_t)N * K * OH * OW)   /* the fault: `>=` is meant */
        return;
    y[index] = naive_fwd_at(x, w, index, N, C, H, W, K, R, S, OH, OW, G, PAD_T, PAD_L,
                            STRIDE_H, STRIDE_W, DIL_H, DIL_W);
}

__kernel void local_race_fwd(__global const float *x, __global const float *w, __global float *y,
                             CS_CONV_PARAMS)
{
    __local int last;
    const size_t index = get_global_id(0);
    last = get_local_id(0);                /* the fault: every work-item writes it */
    barrier(CLK_LOCAL_MEM_FENCE);
    if (index < (size_t)N * K * OH * OW && last >= 0)
        y[index] = naive_fwd_at(x, w, index, N, C, H, W, K, R, S, OH, OW, G, PAD_T, PAD_L,
                                STRIDE_H, STRIDE_W, DIL_H, DIL_W);
}

__kernel void pairs_fwd(__global const float *x, __global const float *w, __global float *y,
                        CS_CONV_PARAMS)
{
    const size_t index = 2 * get_global_id(0);   /* the fault: index + 1 may be the size */
    for (size_t i = index; i < index + 2; ++i)
        y[i] = naive_fwd_at(x, w, i % ((size_t)N * K * OH * OW), N, C, H, W, K, R, S, OH, OW, G,
                            PAD_T, PAD_L, STRIDE_H, STRIDE_W, DIL_H, DIL_W);
}

__kernel void overread_fwd(__global const float *x, __global const float *w, __global float *y,
                           CS_CONV_PARAMS)
{
    const size_t index = get_global_id(0);
    if (index >= (size_t)N * K * OH * OW)
        return;
    const int ow = index % OW, oh = (index / OW) % OH, k = (index / ((size_t)OW * OH)) % K;
    const int n = index / ((size_t)OW * OH * K), cpg = C / G, c0 = (k / (K / G)) * cpg;
    float acc = 0.0f;
    for (int c = 0; c < CS_DIV_UP(cpg, 4) * 4; ++c)   /* the fault: channels past cpg are read */
        for (int r = 0; r < R; ++r)
            for (int s = 0; s < S; ++s) {
                const float weight = c < cpg ? w[CS_NCHW(k, c, r, s, cpg, R, S)] : 0.0f;
                acc += cs_padded_load(x + CS_NCHW(n, c0 + c, 0, 0, C, H, W),
                                      oh * STRIDE_H - PAD_T + r * DIL_H,
                                      ow * STRIDE_W - PAD_L + s * DIL_W, H, W) * weight;
            }
    y[index] = acc;
}
