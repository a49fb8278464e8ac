/* fma_peak.cl: measures a device's float32 FMA throughput (used by gemm_probe.py --peak).
 *
 * Each work-item runs FMA_CHAINS independent chains of `floatFMA_VW` multiply-adds, `iters`
 * times, and writes one float so nothing is optimised away. FLOPs per work-item:
 *     2 * FMA_VW * FMA_CHAINS * iters   (iters: kernel argument)
 * The chains are independent so the FMA latency is hidden (needs >= latency * pipes chains).
 *
 * Defines read:
 *   FMA_VW      vector width of the chains (1, 2, 4, 8, 16)
 *   FMA_CHAINS  independent accumulators per work-item
 */
#ifndef FMA_VW
#define FMA_VW 8 /* vector width of each FMA chain */
#endif
#ifndef FMA_CHAINS
#define FMA_CHAINS 12 /* independent accumulator chains per work-item */
#endif

#define FMA_CAT_(a, b) a##b
#define FMA_CAT(a, b) FMA_CAT_(a, b)
#if FMA_VW == 1
#define vtype float
#else
#define vtype FMA_CAT(float, FMA_VW)
#endif

__kernel void fma_peak(__global float *out, const int iters, const float seed)
{
    vtype acc[FMA_CHAINS];
    const vtype m = (vtype)(0.999999f);
    const vtype a = (vtype)(seed * 1e-7f);
#pragma unroll
    for (int c = 0; c < FMA_CHAINS; ++c)
        acc[c] = (vtype)(seed + (float)c + (float)get_global_id(0));
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int c = 0; c < FMA_CHAINS; ++c)
            acc[c] = fma(acc[c], m, a);
    }
    vtype s = acc[0];
#pragma unroll
    for (int c = 1; c < FMA_CHAINS; ++c)
        s += acc[c];
#if FMA_VW == 1
    out[get_global_id(0)] = s;
#else
    float r = 0.0f;
    float t[FMA_VW];
    FMA_CAT(vstore, FMA_VW)(s, 0, t);
    for (int l = 0; l < FMA_VW; ++l)
        r += t[l];
    out[get_global_id(0)] = r;
#endif
}
