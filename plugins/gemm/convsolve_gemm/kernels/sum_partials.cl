/* sum_partials.cl: adds up the partial results of a split reduction (backward weights).
 *
 * out[i] = (accumulate ? out[i] : 0) + sum over s < count of partial[offset + s * size + i]
 * for i < size, summed in slice order: deterministic, no atomics.  With CS_EPI, out[i] = the
 * backward epilogue of the sum, alpha * sum + beta * out[i] (convsolve_epilogue.h), and
 * `accumulate` is not read: accumulating is the epilogue's blend with beta = 1.
 *
 * Kernel:
 *   sum_partials(const global real *partial, int offset, int count, int size,
 *                global real *out, int accumulate[, CS_EPILOGUE_PARAMS with CS_EPI])
 *   global size = (size rounded up to any multiple), local size = any (NULL is fine)
 *
 * Defines read: the epilogue's (convsolve_epilogue.h; backward: alpha and blend, which take no
 * channel); CS_PRECISION via convsolve.h (`real`).
 */
#include "convsolve_epilogue.h"

__kernel void sum_partials(const __global real *restrict partial, const int offset,
                           const int count, const int size, __global real *restrict out,
                           const int accumulate CS_EPI_ARGS)
{
    const int i = get_global_id(0);
    if (i >= size)
        return;
    real sum = !CS_EPI && accumulate ? out[i] : (real)0;
    for (int s = 0; s < count; ++s)
        sum += partial[offset + (size_t)s * size + i];
    CS_EPI_VALUES(epi, 0);
    CS_EPI_STORE(epi, out, i, 0, sum);
}
