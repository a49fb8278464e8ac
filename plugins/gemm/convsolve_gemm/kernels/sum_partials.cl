/* sum_partials.cl: adds up the partial results of a split reduction (backward weights).
 *
 * out[i] = (accumulate ? out[i] : 0) + sum over s < count of partial[offset + s * size + i]
 * for i < size, summed in slice order: deterministic, no atomics.
 *
 * Kernel:
 *   sum_partials(const global real *partial, int offset, int count, int size,
 *                global real *out, int accumulate)
 *   global size = (size rounded up to any multiple), local size = any (NULL is fine)
 *
 * Defines read: none besides CS_PRECISION via convsolve.h (`real`).
 */
#include "convsolve.h"

__kernel void sum_partials(const __global real *restrict partial, const int offset,
                           const int count, const int size, __global real *restrict out,
                           const int accumulate)
{
    const int i = get_global_id(0);
    if (i >= size)
        return;
    real sum = accumulate ? out[i] : (real)0;
    for (int s = 0; s < count; ++s)
        sum += partial[offset + (size_t)s * size + i];
    out[i] = sum;
}
