/* wrw.cl: backward-weights as a two-stage reduction, deterministic (no atomics).
 *
 * Layouts: x NCHW, dy N K OH OW, dw KCRS (C = channels per group); partial sums float32.
 * Stage 1, wrw_partial: the reduction over N * OH * OW is cut into tiles, tile t being TR output
 *   rows of image t / TPI (rows (t % TPI) * TR ...); each work-item reduces one tile for KB output
 *   channels x SB filter columns of one (input channel, filter row), accumulating `vec`s of VW
 *   output pixels along the width (KB * SB accumulators: per step KB dy vectors and SB x vectors,
 *   an outer product), then sums each vector's lanes in order and writes
 *   partial[slot][k][c][r][s], slot = t - t_first (the tile's place in this chunk of tiles).
 *   Zero padding of x takes part in the products (0 * inf = NaN, as in the reference); lanes past
 *   OW are zero in both factors.
 *   global (C/G * R * ceil(S / SB), G * ceil((K/G) / KB), tiles in the chunk), any local size.
 * Stage 2 is the core's split sum (convsolve.SplitSum, convsolve's kernels/split_sum.cl):
 *   dw[i] = (...((dw[i] + partial[0][i]) + partial[1][i]) + ...), starting from partial[0][i]
 *   itself for the first chunk: a left fold in tile order, so results are bitwise the same for
 *   every chunking of the batch; the last chunk's fold stores dw's epilogue (alpha and blend).
 * Blocks that would run past the group's channels (or the filter's columns) are shifted back to
 * end at the last one (KB <= K/G, SB <= S, which the config space keeps) and store only their own.
 *
 * wrw_taps (below) is stage 1 for narrow filters, vectorised along the taps.
 * Defines read: VW, KB, SB (below), CS_PRECISION.
 */
#ifndef VW
#define VW 16   /* output pixels per vector, along the output width: 1, 2, 4, 8 or 16 */
#endif
#ifndef KB
#define KB 4    /* output channels a work-item reduces */
#endif
#ifndef SB
#define SB 4    /* filter columns (taps of one filter row) a work-item reduces */
#endif

#include "direct_common.cl"

__kernel void wrw_partial(__global const real *x, __global const real *dy,
                          __global float *partial, CS_CONV_PARAMS, const int TR, const int TPI,
                          const int t_first)
{
    const int kpg = K / G, cpg = C / G;
    const int sblocks = CS_DIV_UP(S, SB), kblocks = CS_DIV_UP(kpg, KB);
    const int a = get_global_id(0), b = get_global_id(1);
    if (a >= cpg * R * sblocks || b >= G * kblocks)
        return;
    const int sb = a % sblocks, r = (a / sblocks) % R, c = a / (sblocks * R);
    const int kb = b % kblocks, g = b / kblocks;
    const int sfirst = sb * SB, s0 = min(sfirst, S - SB);
    const int kfirst = kb * KB, k0 = min(kfirst, kpg - KB);
    const int slot = get_global_id(2), t = t_first + slot;
    const int n = t / TPI, oh_begin = (t % TPI) * TR, oh_end = min(OH, oh_begin + TR);
    const size_t plane = CS_NCHW(n, g * cpg + c, 0, 0, C, H, W);
    const size_t dyk = CS_NCHW(n, g * kpg + k0, 0, 0, K, OH, OW);
    const size_t xsize = (size_t)N * C * H * W, dysize = (size_t)N * K * OH * OW;
    vec acc[KB][SB];
#pragma unroll
    for (int kk = 0; kk < KB; ++kk)
#pragma unroll
        for (int ss = 0; ss < SB; ++ss)
            acc[kk][ss] = (vec)0.0f;
    for (int oh = oh_begin; oh < oh_end; ++oh) {
        const int ih = oh * STRIDE_H - PAD_T + r * DIL_H;
        const bool valid = ih >= 0 && ih < H;
        const size_t row = plane + (valid ? (size_t)ih * W : 0);
        for (int ow = 0; ow < OW; ow += VW) {
            const int lanes = min(VW, OW - ow);
            vec d[KB], in[SB];
#pragma unroll
            for (int kk = 0; kk < KB; ++kk) {
                const size_t at = dyk + ((size_t)kk * OH + oh) * OW;
                d[kk] = lanes == VW ? GLOAD(dy + at + ow)
                                    : dc_load(dy, dysize, at, ow, 1, OW, lanes);
            }
            const int iw0 = ow * STRIDE_W - PAD_L + s0 * DIL_W;
            if (valid && lanes == VW && STRIDE_W <= 2 && iw0 >= 0
                && iw0 + (SB - 1) * DIL_W + VW * STRIDE_W <= W) {   /* all inside: no checks */
#pragma unroll
                for (int ss = 0; ss < SB; ++ss) {
                    __global const real *p = x + row + iw0 + ss * DIL_W;
                    in[ss] = STRIDE_W == 1 ? GLOAD(p) : DC_EVEN(GLOAD(p), GLOAD(p + VW));
                }
            } else {
#pragma unroll
                for (int ss = 0; ss < SB; ++ss)
                    in[ss] = dc_load(x, xsize, row, iw0 + ss * DIL_W, STRIDE_W, W,
                                     valid ? lanes : 0);
            }
#pragma unroll
            for (int kk = 0; kk < KB; ++kk)
#pragma unroll
                for (int ss = 0; ss < SB; ++ss)
                    acc[kk][ss] = fma(d[kk], in[ss], acc[kk][ss]);
        }
    }
    __global float *out = partial + (size_t)slot * K * cpg * R * S;
#pragma unroll   /* constant bounds: acc stays in registers (no run-time indexing) */
    for (int kk = 0; kk < KB; ++kk)
#pragma unroll
        for (int ss = 0; ss < SB; ++ss)
            if (kk >= kfirst - k0 && ss >= sfirst - s0)
                out[CS_NCHW(g * kpg + k0 + kk, c, r, s0 + ss, cpg, R, S)] = dc_hsum(acc[kk][ss]);
}

#if VW >= 4
/* wrw_taps: the same partial sums with vectors along the filter's taps instead: lanes
 * [0, VW/2) hold filter row r, lanes [VW/2, VW) row r + 1, columns s < S <= VW/2 (DIL_W = 1),
 * so the x values of one output pixel are two contiguous half-vector loads and each dy value is
 * broadcast into KB accumulators (an outer product along the output channels; no horizontal
 * sums).  Work-item: KB output channels x one input channel x a pair of filter rows x a tile.
 *   global (C/G * ceil(R / 2), G * ceil((K/G) / KB), tiles in the chunk), any local size. */
#if VW == 16
#define HW 8    /* half a vector: the columns of one filter row */
#elif VW == 8
#define HW 4
#else
#define HW 2
#endif
typedef DC_CAT(float, HW) hvec;
#if defined(__clang__)
typedef float dc_uhvec __attribute__((ext_vector_type(HW), aligned(4)));
#define HLOAD(p) (*(__global const dc_uhvec *)(p))
#else
#define HLOAD(p) DC_CAT(vload, HW)(0, (p))
#endif

/* x[row + iw + i], i < HW, 0 outside the row [0, W) or when !valid. */
inline hvec half_row(__global const real *x, size_t row, int iw, int W, bool valid)
{
    if (valid && iw >= 0 && iw + HW <= W)
        return HLOAD(x + row + iw);
    float t[HW];
    for (int i = 0; i < HW; ++i)
        t[i] = (valid && iw + i >= 0 && iw + i < W) ? (float)x[row + iw + i] : 0.0f;
    return DC_CAT(vload, HW)(0, t);
}

__kernel void wrw_taps(__global const real *x, __global const real *dy, __global float *partial,
                       CS_CONV_PARAMS, const int TR, const int TPI, const int t_first)
{
    const int kpg = K / G, cpg = C / G, pairs = CS_DIV_UP(R, 2), kblocks = CS_DIV_UP(kpg, KB);
    const int a = get_global_id(0), b = get_global_id(1);
    if (a >= cpg * pairs || b >= G * kblocks)
        return;
    const int r0 = a % pairs * 2, c = a / pairs, kb = b % kblocks, g = b / kblocks;
    const int kfirst = kb * KB, k0 = min(kfirst, kpg - KB);
    const int slot = get_global_id(2), t = t_first + slot;
    const int n = t / TPI, oh_begin = (t % TPI) * TR, oh_end = min(OH, oh_begin + TR);
    const size_t plane = CS_NCHW(n, g * cpg + c, 0, 0, C, H, W), channel = (size_t)OH * OW;
    __global const real *dyk = dy + CS_NCHW(n, g * kpg + k0, 0, 0, K, OH, OW);
    vec acc[KB];
#pragma unroll
    for (int kk = 0; kk < KB; ++kk)
        acc[kk] = (vec)0.0f;
    for (int oh = oh_begin; oh < oh_end; ++oh) {
        const int ih0 = oh * STRIDE_H - PAD_T + r0 * DIL_H, ih1 = ih0 + DIL_H;
        const bool valid0 = ih0 >= 0 && ih0 < H, valid1 = r0 + 1 < R && ih1 >= 0 && ih1 < H;
        const size_t row0 = plane + (valid0 ? (size_t)ih0 * W : 0);
        const size_t row1 = plane + (valid1 ? (size_t)ih1 * W : 0);
        for (int ow = 0; ow < OW; ++ow) {
            const int iw = ow * STRIDE_W - PAD_L;
            const vec in = (vec)(half_row(x, row0, iw, W, valid0),
                                 half_row(x, row1, iw, W, valid1));
            __global const real *d = dyk + (size_t)oh * OW + ow;
#pragma unroll
            for (int kk = 0; kk < KB; ++kk)
                acc[kk] = fma((vec)((float)d[kk * channel]), in, acc[kk]);
        }
    }
    __global float *out = partial + (size_t)slot * K * cpg * R * S;
#pragma unroll
    for (int kk = 0; kk < KB; ++kk) {
        float lanes[VW];
        VSTORE(acc[kk], lanes);
        for (int i = 0; i < VW; ++i) {
            const int r = r0 + i / HW, s = i % HW;
            if (kk >= kfirst - k0 && r < R && s < S)
                out[CS_NCHW(g * kpg + k0 + kk, c, r, s, cpg, R, S)] = lanes[i];
        }
    }
}
#endif
