/* layout.cl: a tensor copied between channels-first and channels-last order, for the engine's
 * composite layout candidates (engine/layouts.py: transpose in, solve, transpose out).
 *
 *   to_last:   dst[(n * S + s) * C + c] = src[(n * C + c) * S + s]   (NCHW -> NHWC)
 *   otherwise: dst[(n * C + c) * S + s] = src[(n * S + s) * C + c]   (NHWC -> NCHW)
 *
 * for n < N, c < C, s < S, where S is the spatial size (W, H * W or D * H * W: every rank is one
 * kernel); weights are the same with N = K and C = C / groups.  Each image is a rows x cols
 * matrix (rows = C, cols = S to channels-last; rows = S, cols = C from it) transposed in
 * T x T tiles, so both the reads and the writes run along memory.
 *
 * Kernels (same arguments; T = CS_LAYOUT_TILE):
 *   cs_layout(const global real *src, global real *dst, int C, int S, int to_last)
 *     GPUs: a work-group of T x T work-items per tile, staged in local memory;
 *     global size = (CS_DIV_UP(cols, T) * T, CS_DIV_UP(rows, T) * T, N), local (T, T, 1)
 *   cs_layout_private(...)
 *     CPUs: a work-item per tile, staged in private memory (no barrier: PoCL runs a work-group's
 *     items in loops split at each barrier, 2-8x slower here on ResNet-50-sized tensors);
 *     global size = (CS_DIV_UP(cols, T), CS_DIV_UP(rows, T), N), local (1, 1, 1) (a fixed
 *     shape: PoCL compiles a work-group function per local size, and its own choice for the
 *     T x T private tiles of large work-groups overflowed its stack at T = 32)
 *
 * Defines read: CS_LAYOUT_TILE; CS_PRECISION via convsolve.h (`real`).
 */
#include "convsolve.h"

#ifndef CS_LAYOUT_TILE
#define CS_LAYOUT_TILE 16 /* side of the square tile one work-group transposes */
#endif

__kernel __attribute__((reqd_work_group_size(CS_LAYOUT_TILE, CS_LAYOUT_TILE, 1)))
void cs_layout(const __global real *restrict src, __global real *restrict dst, const int C,
               const int S, const int to_last)
{
    __local real tile[CS_LAYOUT_TILE][CS_LAYOUT_TILE + 1];   /* +1: no bank conflicts */
    const int rows = to_last ? C : S, cols = to_last ? S : C;
    const size_t base = (size_t)get_global_id(2) * C * S;
    const int tx = get_local_id(0), ty = get_local_id(1);
    const int row0 = get_group_id(1) * CS_LAYOUT_TILE, col0 = get_group_id(0) * CS_LAYOUT_TILE;
    if (row0 + ty < rows && col0 + tx < cols)
        tile[ty][tx] = src[base + (size_t)(row0 + ty) * cols + col0 + tx];
    barrier(CLK_LOCAL_MEM_FENCE);
    /* dst is cols x rows: work-item (tx, ty) writes dst[col0 + ty][row0 + tx] */
    if (row0 + tx < rows && col0 + ty < cols)
        dst[base + (size_t)(col0 + ty) * rows + row0 + tx] = tile[tx][ty];
}

__kernel void cs_layout_private(const __global real *restrict src, __global real *restrict dst,
                                const int C, const int S, const int to_last)
{
    real tile[CS_LAYOUT_TILE][CS_LAYOUT_TILE];
    const int rows = to_last ? C : S, cols = to_last ? S : C;
    const size_t base = (size_t)get_global_id(2) * C * S;
    const int row0 = get_global_id(1) * CS_LAYOUT_TILE, col0 = get_global_id(0) * CS_LAYOUT_TILE;
    const int nr = min(CS_LAYOUT_TILE, rows - row0), nc = min(CS_LAYOUT_TILE, cols - col0);
    for (int r = 0; r < nr; ++r)
        for (int c = 0; c < nc; ++c)
            tile[c][r] = src[base + (size_t)(row0 + r) * cols + col0 + c];
    for (int c = 0; c < nc; ++c)
        for (int r = 0; r < nr; ++r)
            dst[base + (size_t)(col0 + c) * rows + row0 + r] = tile[c][r];
}
