/* sum_images.cl: adds up per-image partial results, for batched backward-weights GEMMs.
 *
 * out[i] = (accumulate ? out[i] : 0) + sum over n < count of partial[offset + n * size + i]
 * for i < size, summed in image order: deterministic, no atomics.
 *
 * Kernel:
 *   sum_images(const global real *partial, int offset, int count, int size,
 *              global real *out, int accumulate)
 *   global size = (size rounded up to any multiple), local size = any (NULL is fine)
 *
 * Defines read: none besides CS_PRECISION via convsolve.h (`real`).
 */
#include "convsolve.h"

__kernel void sum_images(const __global real *restrict partial, const int offset,
                         const int count, const int size, __global real *restrict out,
                         const int accumulate)
{
    const int i = get_global_id(0);
    if (i >= size)
        return;
    real sum = accumulate ? out[i] : (real)0;
    for (int n = 0; n < count; ++n)
        sum += partial[offset + (size_t)n * size + i];
    out[i] = sum;
}
