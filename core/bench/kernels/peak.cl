/* peak.cl: the device's float32 FMA throughput and copy bandwidth, for `convsolve bench`.
 *
 * cs_peak_fma: each work-item runs PEAK_CHAINS independent chains of `floatPEAK_VW` fused
 *   multiply-adds, `iters` times, and writes its sum vector so nothing is optimised away.
 *   FLOPs per work-item: 2 * PEAK_VW * PEAK_CHAINS * iters  (iters: kernel argument).
 *   Independent chains hide the FMA latency (needs about latency * FMA pipes chains in flight);
 *   explicit vectors make CPU compilers (PoCL) use the full SIMD width.
 * cs_peak_copy: dst[i] = src[i] over `floatCOPY_VW` elements, one vector per work-item;
 *   bytes moved = 2 * global size * COPY_VW * 4.
 *
 * Layouts: plain 1-D float buffers.
 * Defines read:
 *   PEAK_VW      vector width of each FMA chain: 1, 2, 4, 8 or 16
 *   PEAK_CHAINS  independent accumulators per work-item
 *   COPY_VW      vector width of the copy: 1, 2, 4, 8 or 16
 */
#ifndef PEAK_VW
#define PEAK_VW 8 /* vector width of each FMA chain */
#endif
#ifndef PEAK_CHAINS
#define PEAK_CHAINS 12 /* independent accumulator chains per work-item */
#endif
#ifndef COPY_VW
#define COPY_VW 4 /* vector width of one copied element */
#endif

#define CS_PEAK_CAT_(a, b) a##b
#define CS_PEAK_CAT(a, b) CS_PEAK_CAT_(a, b)
#if PEAK_VW == 1
#define peak_t float
#else
#define peak_t CS_PEAK_CAT(float, PEAK_VW)
#endif
#if COPY_VW == 1
#define copy_t float
#else
#define copy_t CS_PEAK_CAT(float, COPY_VW)
#endif

__kernel void cs_peak_fma(__global float *out, /* PEAK_VW floats per work-item */
                           const int iters, const float seed)
{
    peak_t acc[PEAK_CHAINS];
    const peak_t m = (peak_t)(0.999999f);
    const peak_t a = (peak_t)(seed * 1e-7f);
#pragma unroll
    for (int c = 0; c < PEAK_CHAINS; ++c)
        acc[c] = (peak_t)(seed + (float)c + (float)get_global_id(0));
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int c = 0; c < PEAK_CHAINS; ++c)
            acc[c] = fma(acc[c], m, a);
    }
    peak_t s = acc[0];
#pragma unroll
    for (int c = 1; c < PEAK_CHAINS; ++c)
        s += acc[c];
    ((__global peak_t *)out)[get_global_id(0)] = s; /* whole vector: no float16 call arguments */
}

__kernel void cs_peak_copy(__global const copy_t *src, __global copy_t *dst)
{
    const size_t i = get_global_id(0);
    dst[i] = src[i];
}
