/* bias_grad.cl: backward-bias, db[k] = alpha * sum over n, h, w of dy[n][k][h][w] + beta * db[k],
 * as a deterministic tree reduction (convsolve.bias_grad launches it).
 *
 * One pass: out[id] = the sum of block b of segment s of channel k of `in`, id = (k * segments
 * + s) * blocks + b, block b being elements [64 b, 64 b + 64) (fewer in a segment's last block)
 * of in + in_off + (s * channels + k) * len.  The first pass reads dy (segments = N images,
 * len = H * W), each later one the previous pass's partial sums ([K][segments * blocks], one
 * segment), until one value per channel is left: that pass (`final`) writes
 * out[k] = alpha * sum + beta * out[k] (alpha == 0, beta == 0: that operand is not read).  A block
 * is summed as a balanced binary tree (4 vectors of 16, then their lanes), zeros completing a
 * short block, so the whole reduction is a balanced tree whatever the sizes: error grows with
 * log2 of N * H * W, not with it, and the order never changes (bitwise reproducible).
 *
 * Kernel:
 *   cs_bias_sum(const global real *in, int in_off, int len, int channels, int segments,
 *               int blocks, global real *out, int out_off, int final, float alpha, float beta)
 *   global size = (channels * segments * blocks), local size = any
 *
 * Defines read: CS_PRECISION via convsolve.h.
 */
#include "convsolve.h"

#define CS_BIAS_BLOCK 64 /* elements per work-item (4 x 16); convsolve.bias_grad.BLOCK */

inline float cs_tree16(float16 v)
{
    const float8 a = v.lo + v.hi;
    const float4 b = a.lo + a.hi;
    const float2 c = b.lo + b.hi;
    return c.x + c.y;
}

__kernel void cs_bias_sum(const __global real *in, const int in_off, const int len,
                          const int channels, const int segments, const int blocks,
                          __global real *out, const int out_off, const int final,
                          const float alpha, const float beta)
{
    const int id = get_global_id(0);
    const int b = id % blocks, rest = id / blocks;
    const int s = rest % segments, k = rest / segments;
    const __global real *p = in + in_off + ((size_t)s * channels + k) * len
                             + (size_t)b * CS_BIAS_BLOCK;
    const int n = min(CS_BIAS_BLOCK, len - b * CS_BIAS_BLOCK);
    float16 v0, v1, v2, v3;
    if (n == CS_BIAS_BLOCK) {
        v0 = vload16(0, p);
        v1 = vload16(1, p);
        v2 = vload16(2, p);
        v3 = vload16(3, p);
    } else {
        float buf[CS_BIAS_BLOCK];
        for (int i = 0; i < CS_BIAS_BLOCK; ++i)
            buf[i] = i < n ? p[i] : 0.0f;
        v0 = vload16(0, buf);
        v1 = vload16(1, buf);
        v2 = vload16(2, buf);
        v3 = vload16(3, buf);
    }
    float sum = cs_tree16((v0 + v1) + (v2 + v3));
    if (final) {
        sum = alpha != 0.0f ? alpha * sum : 0.0f;
        if (beta != 0.0f)
            sum += beta * out[out_off + id];
    }
    out[out_off + id] = sum;
}
