/* split_sum.cl: the partial results of a split reduction added up in a fixed order, the output's
 * epilogue in the store (convsolve.SplitSum builds and launches it).
 *
 * out[i] = (out[i] +) partial[offset + i] + partial[offset + size + i] + ...
 *          + partial[offset + (count - 1) * size + i],   for i < size
 * a left fold in partial order, starting from out's prior contents with `accumulate` (a
 * reduction continued over several launches), else from the first partial itself.  One
 * work-item per element and no atomics: the result is bitwise the same run after run, whatever
 * the launch's local size.  Partials are float32 (a solver's scratch), the sum is a float.
 * With CS_EPI, out[i] = the epilogue of the sum (convsolve_epilogue.h's CS_EPI_STORE: a forward
 * output's stages, or a backward one's alpha * sum, + beta * out[i] with blend), its values
 * following `accumulate`; element i is channel (i / inner) % chans of the output (a
 * channels-first output: inner its pixels an image; channels-last: 1; chans 1 for a backward
 * output, whose stages take no channel).
 *
 * Kernel:
 *   cs_split_sum(const global float *partial, int offset, int count, int size,
 *                global real *out, int accumulate, int chans, int inner
 *                [, CS_EPILOGUE_PARAMS with CS_EPI])
 *   count >= 1, chans >= 1, inner >= 1; global size = (size rounded up to any multiple),
 *   local size = any
 *
 * Defines read: the epilogue's (convsolve_epilogue.h); CS_PRECISION via convsolve.h (`real`).
 */
#include "convsolve_epilogue.h"

__kernel void cs_split_sum(const __global float *restrict partial, const int offset,
                           const int count, const int size, __global real *restrict out,
                           const int accumulate, const int chans,
                           const int inner CS_EPI_ARGS)
{
    const int i = get_global_id(0);
    if (i >= size)
        return;
    const __global float *p = partial + offset + i;
    float sum = accumulate ? (float)out[i] + p[0] : p[0];
    for (int s = 1; s < count; ++s)
        sum += p[(size_t)s * size];
    CS_EPI_VALUES(epi, 0);
    CS_EPI_STORE(epi, out, i, i / inner % chans, sum);
}
