/* sum_splits.cl: backward weights' partial results added up in split order (deterministic).
 *
 * Kernel sum_splits(partials, dw, size, SPLITS[, CS_EPILOGUE_PARAMS]): dw[i] = the epilogue
 * (convsolve_epilogue.h; none without CS_EPI) of partials[i] + partials[size + i] + ... +
 * partials[(SPLITS - 1) * size + i], left to right, for i < size.  Launch: a 1-D range of at
 * least size work-items, any local size; work-items past the end return at once.
 *
 * Defines read: CS_PRECISION (convsolve.h); the epilogue's, backward: alpha and blend, which take
 * no channel.
 */
#include "convsolve_epilogue.h"

__kernel void sum_splits(__global const real *partials, __global real *dw, const int size,
                         const int SPLITS CS_EPI_ARGS)
{
    const int i = get_global_id(0);
    if (i >= size)
        return;
    float sum = (float)partials[i];
    for (int s = 1; s < SPLITS; ++s)
        sum += (float)partials[(size_t)s * size + i];
    CS_EPI_VALUES(ig_epi, 0);
    CS_EPI_STORE(ig_epi, dw, i, 0, sum);
}
