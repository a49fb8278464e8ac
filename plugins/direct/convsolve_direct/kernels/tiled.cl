/* tiled.cl: register-tiled direct convolution, forward (tiled_fwd) and backward-data (tiled_bwd).
 *
 * Layouts: x NCHW, w KCRS (C = channels per group), y N K OH OW; all packed, float32.
 * Each work-item computes a block of KB channels x RB rows x VN vectors of VW pixels along the
 * output width in registers (KB * RB * VN accumulators of type `vec`); per filter tap it loads
 * RB * VN input vectors and broadcasts KB filter values, an outer product of FMAs.  The filter
 * values come from wt, the filters re-laid by tiled_weights with the block's channels innermost,
 * so a tap's KB values lie at constant offsets from one pointer.  Dynamic: the sizes are kernel
 * arguments (CS_CONV_PARAMS); -D FIL_H / FIL_W compile the filter size in (the specialised
 * variants, 3x3 and 7x7, whose tap loops unroll).
 *
 * tiled_weights(w, wt, by_input, CS_CONV_PARAMS)   one work-item per filter value
 *   wt = w as [G][C/G][R][S][K/G] (by_input = 0, forward) or [G][K/G][R][S][C/G] (1, backward).
 * tiled_fwd(x, wt, y, CS_CONV_PARAMS[, CS_EPILOGUE_PARAMS])
 *   global (WGX * ceil(ceil(OW / (VW*VN)) / WGX), WGY * ceil(ceil(OH / RB) / WGY),
 *           N * G * ceil((K/G) / KB)), local (WGX, WGY, 1).
 *   Zero padding takes part in the products (0 * inf = NaN, as in the reference).
 * tiled_bwd(dx, wt, dy, CS_CONV_PARAMS[, CS_EPILOGUE_PARAMS])   dx = conv_transpose(dy, w)
 *   Phase decomposition: the dx pixels (qh + SH * t, qw + SW * u) of one phase (qh, qw) are
 *   reached by the taps with (qh + PAD_T - r * DIL_H) % SH == 0 (and likewise for s) only, from
 *   dy rows t + (qh + PAD_T - r * DIL_H) / SH and contiguous dy columns: a work-item computes
 *   one phase's KB input channels x RB phase rows x VN vectors and never visits the zeros a
 *   zero-inserted (strided) transposed convolution would multiply.  dy positions outside the
 *   tensor contribute nothing (the masked products are dropped, not multiplied by 0).
 *   global (SW * WGX * ceil(ceil(ceil(W / SW) / (VW*VN)) / WGX), SH * WGY * ...rows alike...,
 *           N * G * ceil((C/G) / KB)), local (WGX, WGY, 1); qw = gid0 % SW, qh = gid1 % SH.
 * A channel block that would run past the group's channels is shifted back to end at the last
 * one (KB <= channels per group, which the config space keeps) and stores only its own.
 * With CS_EPI both kernels store the output's epilogue (convsolve_epilogue.h; its values follow
 * CS_CONV_PARAMS), each output element once.
 *
 * Defines read: VW, VN, RB, KB, USE_LOCAL, LW_CAP, FIL_H, FIL_W (direct_common.cl), CS_PRECISION,
 * the epilogue's (CS_EPI...).
 */
#ifndef VW
#define VW 16       /* output pixels per vector, along the output width: 1, 2, 4, 8 or 16 */
#endif
#ifndef VN
#define VN 1        /* vectors per output row a work-item computes */
#endif
#ifndef RB
#define RB 2        /* output rows a work-item computes (backward-data: rows of one phase) */
#endif
#ifndef KB
#define KB 8        /* channels a work-item computes: output (fwd) or input (bwd) channels */
#endif
#ifndef USE_LOCAL
#define USE_LOCAL 0 /* 1: each work-group stages its filter values in local memory (GPUs) */
#endif
#ifndef LW_CAP
#define LW_CAP 4096 /* floats of local memory for staged filters (USE_LOCAL = 1) */
#endif

#include "direct_common.cl"

/* The filter values of tap (r, s) of reduction index red (fwd: input channel, bwd: output
 * channel) for the KB block members, contiguous: from the re-laid weights in global memory, or
 * from the work-group's staged copy of reduction indices [red0, red0 + chunk) (USE_LOCAL). */
#if USE_LOCAL
#define WEIGHTS(red, r, s) (lw + (((red) - red0) * taps + (r) * FS + (s)) * KB)
#define WSPACE __local     /* the address space WEIGHTS points into */
#else
#define WEIGHTS(red, r, s) (wg + ((size_t)(red) * taps + (r) * FS + (s)) * members)
#define WSPACE __global
#endif

#if USE_LOCAL
/* Copy the block's filter values of reduction indices [red0, red0 + count) into lw, members
 * innermost; every work-item of the group calls it. */
inline void stage(__local float *lw, __global const float *wg, int members, int taps, int red0,
                  int count)
{
    barrier(CLK_LOCAL_MEM_FENCE);
    const int lid = get_local_id(1) * get_local_size(0) + get_local_id(0);
    const int size = get_local_size(0) * get_local_size(1);
    for (int e = lid; e < count * taps * KB; e += size)
        lw[e] = wg[((size_t)red0 * taps + e / KB) * members + e % KB];
    barrier(CLK_LOCAL_MEM_FENCE);
}
#define STAGE_CHUNK(reductions) min((reductions), LW_CAP / (KB * taps))
#else
#define STAGE_CHUNK(reductions) (reductions)
#endif

/* acc[kk][j][v] += in[j][v] * wp[kk]: the register tile's outer product for one tap. */
#define OUTER_PRODUCT(acc, in, wp)                                       \
    _Pragma("unroll") for (int kk = 0; kk < KB; ++kk) {                  \
        const vec wv = (vec)((wp)[kk]);                                    \
        _Pragma("unroll") for (int j = 0; j < RB; ++j)                   \
            _Pragma("unroll") for (int v = 0; v < VN; ++v)               \
                acc[kk][j][v] = fma(in[j][v], wv, acc[kk][j][v]);        \
    }

#define ZERO_TILE(acc)                                                   \
    _Pragma("unroll") for (int kk = 0; kk < KB; ++kk)                    \
        _Pragma("unroll") for (int j = 0; j < RB; ++j)                   \
            _Pragma("unroll") for (int v = 0; v < VN; ++v)               \
                acc[kk][j][v] = (vec)0.0f

/* wt = w re-laid with the block members innermost, per group: forward [G][C/G][R][S][K/G]
 * (by_input = 0), backward-data [G][K/G][R][S][C/G] (by_input = 1).  One work-item per value. */
__kernel void tiled_weights(__global const real *w, __global float *wt, const int by_input,
                            CS_CONV_PARAMS)
{
    const int kpg = K / G, cpg = C / G, taps = R * S;
    const int i = get_global_id(0);
    if (i >= K * cpg * taps)
        return;
    const int tap = i % taps, c = (i / taps) % cpg, k = i / (taps * cpg);
    const int g = k / kpg, kg = k % kpg;
    wt[by_input ? ((size_t)(g * kpg + kg) * taps + tap) * cpg + c
                : ((size_t)(g * cpg + c) * taps + tap) * kpg + kg] = (float)w[i];
}

__kernel void tiled_fwd(__global const real *x, __global const float *wt, __global real *y,
                        CS_CONV_PARAMS CS_EPI_ARGS)
{
    CS_EPI_VALUES(epi, 0);
    const int kpg = K / G, cpg = C / G, taps = FR * FS, members = kpg;
    const int blocks = CS_DIV_UP(kpg, KB);
    const int z = get_global_id(2);
    const int kb = z % blocks, g = (z / blocks) % G, n = z / (blocks * G);
    const int kfirst = kb * KB, kstart = min(kfirst, kpg - KB);
    const int ow0 = get_global_id(0) * (VW * VN), oh0 = get_global_id(1) * RB;
    const size_t xsize = (size_t)N * C * H * W;
    __global const float *wg = wt + (size_t)g * cpg * taps * kpg + kstart;
#if USE_LOCAL
    __local float lw[LW_CAP];
#endif
    const int chunk = STAGE_CHUNK(cpg);
    vec acc[KB][RB][VN];
    ZERO_TILE(acc);
    for (int red0 = 0; red0 < cpg; red0 += chunk) {
        const int red1 = min(cpg, red0 + chunk);
#if USE_LOCAL
        stage(lw, wg, members, taps, red0, red1 - red0);
#endif
        for (int c = red0; c < red1; ++c) {
            const size_t plane = CS_NCHW(n, g * cpg + c, 0, 0, C, H, W);
            for (int r = 0; r < FR; ++r) {
                __global const real *rows[RB];   /* row j of the window, or row 0 (unread) */
                size_t offsets[RB];              /* its offset in x */
                bool valid[RB], inside_rows = true;
#pragma unroll
                for (int j = 0; j < RB; ++j) {
                    const int ih = (oh0 + j) * STRIDE_H - PAD_T + r * DIL_H;
                    valid[j] = ih >= 0 && ih < H;
                    inside_rows = inside_rows && valid[j];
                    offsets[j] = plane + (valid[j] ? (size_t)ih * W : 0);
                    rows[j] = x + offsets[j];
                }
                const int iw_first = ow0 * STRIDE_W - PAD_L;
                if (inside_rows && STRIDE_W <= 2 && iw_first >= 0
                    && iw_first + (FS - 1) * DIL_W + VN * VW * STRIDE_W <= W) {
                    UNROLL_TAPS
                    for (int s = 0; s < FS; ++s) {   /* the whole window inside: no checks */
                        vec in[RB][VN];
#pragma unroll
                        for (int j = 0; j < RB; ++j)
#pragma unroll
                            for (int v = 0; v < VN; ++v) {
                                __global const real *p =
                                    rows[j] + iw_first + s * DIL_W + v * VW * STRIDE_W;
                                in[j][v] = STRIDE_W == 1 ? GLOAD(p)
                                                         : DC_EVEN(GLOAD(p), GLOAD(p + VW));
                            }
                        OUTER_PRODUCT(acc, in, WEIGHTS(c, r, s));
                    }
                    continue;
                }
                for (int s = 0; s < FS; ++s) {
                    vec in[RB][VN];
#pragma unroll
                    for (int j = 0; j < RB; ++j)
#pragma unroll
                        for (int v = 0; v < VN; ++v)
                            in[j][v] = dc_load(x, xsize, offsets[j],
                                               iw_first + s * DIL_W + v * VW * STRIDE_W,
                                               STRIDE_W, W, valid[j] ? VW : 0);
                    OUTER_PRODUCT(acc, in, WEIGHTS(c, r, s));
                }
            }
        }
    }
#pragma unroll   /* constant bounds: acc stays in registers (no run-time indexing) */
    for (int kk = 0; kk < KB; ++kk)
#pragma unroll
        for (int j = 0; j < RB; ++j)
#pragma unroll
            for (int v = 0; v < VN; ++v) {
                const int k = g * kpg + kstart + kk;
                if (kk >= kfirst - kstart && oh0 + j < OH && ow0 + v * VW < OW)
                    DC_STORE(y, CS_NCHW(n, k, oh0 + j, 0, K, OH, OW), ow0 + v * VW, 1, OW,
                             acc[kk][j][v], k);
            }
}

/* Taps apart that reach the same phase of the stride: stride / gcd(stride, dilation) (or more
 * than `taps`: one tap only). */
inline int tap_step(int stride, int dilation, int taps)
{
    int t = 1;
    while (t < min(stride, taps) && (t * dilation) % stride != 0)
        ++t;
    return t;
}

/* The first tap t with (offset - t * dilation) % stride == 0 (the taps repeat every `step`),
 * or `taps` when none reaches the phase. */
inline int first_tap(int offset, int stride, int dilation, int step, int taps)
{
    for (int t = 0; t < min(step, taps); ++t)
        if ((offset - t * dilation) % stride == 0)
            return t;
    return taps;
}

__kernel void tiled_bwd(__global real *dx, __global const float *wt, __global const real *dy,
                        CS_CONV_PARAMS CS_EPI_ARGS)
{
    CS_EPI_VALUES(epi, 0);
    const int kpg = K / G, cpg = C / G, taps = FR * FS, members = cpg;
    const int blocks = CS_DIV_UP(cpg, KB);
    const int z = get_global_id(2);
    const int cb = z % blocks, g = (z / blocks) % G, n = z / (blocks * G);
    const int cfirst = cb * KB, cstart = min(cfirst, cpg - KB);
    const int qw = get_global_id(0) % STRIDE_W, qh = get_global_id(1) % STRIDE_H;
    const int u0 = get_global_id(0) / STRIDE_W * (VW * VN);   /* phase column of lane 0 */
    const int t0 = get_global_id(1) / STRIDE_H * RB;          /* phase row of row 0 */
    const size_t dysize = (size_t)N * K * OH * OW;
    __global const float *wg = wt + (size_t)g * kpg * taps * cpg + cstart;
#if USE_LOCAL
    __local float lw[LW_CAP];
#endif
    const int chunk = STAGE_CHUNK(kpg);
    /* the taps that reach phase (qh, qw): r_first, r_first + r_step, ... (likewise s) */
    const int r_step = tap_step(STRIDE_H, DIL_H, FR), s_step = tap_step(STRIDE_W, DIL_W, FS);
    const int r_first = first_tap(qh + PAD_T, STRIDE_H, DIL_H, r_step, FR);
    const int s_first = first_tap(qw + PAD_L, STRIDE_W, DIL_W, s_step, FS);
    vec acc[KB][RB][VN];
    ZERO_TILE(acc);
    for (int red0 = 0; red0 < kpg; red0 += chunk) {
        const int red1 = min(kpg, red0 + chunk);
#if USE_LOCAL
        stage(lw, wg, members, taps, red0, red1 - red0);
#endif
        for (int k = red0; k < red1; ++k) {
            const size_t plane = CS_NCHW(n, g * kpg + k, 0, 0, K, OH, OW);
            for (int r = r_first; r < FR; r += r_step) {
                const int dh = qh + PAD_T - r * DIL_H;   /* = SH * (oh - t): r reaches qh */
                __global const real *rows[RB];   /* dy row of row j, or row 0 (unread) */
                size_t offsets[RB];              /* its offset in dy */
                bool valid[RB], inside_rows = true;
#pragma unroll
                for (int j = 0; j < RB; ++j) {
                    const int oh = t0 + j + dh / STRIDE_H;
                    valid[j] = oh >= 0 && oh < OH;
                    inside_rows = inside_rows && valid[j];
                    offsets[j] = plane + (valid[j] ? (size_t)oh * OW : 0);
                    rows[j] = dy + offsets[j];
                }
                for (int s = s_first; s < FS; s += s_step) {
                    const int dw = qw + PAD_L - s * DIL_W;
                    const int ow0 = u0 + dw / STRIDE_W;
                    vec in[RB][VN];
                    if (inside_rows && ow0 >= 0 && ow0 + VN * VW <= OW) {
#pragma unroll
                        for (int j = 0; j < RB; ++j)
#pragma unroll
                            for (int v = 0; v < VN; ++v)
                                in[j][v] = GLOAD(rows[j] + ow0 + v * VW);
                        OUTER_PRODUCT(acc, in, WEIGHTS(k, r, s));
                        continue;
                    }
                    /* at the borders: products of positions outside dy are dropped */
                    WSPACE const float *wp = WEIGHTS(k, r, s);
#pragma unroll
                    for (int j = 0; j < RB; ++j) {
                        if (!valid[j])
                            continue;
#pragma unroll
                        for (int v = 0; v < VN; ++v) {
                            const vec d = dc_load(dy, dysize, offsets[j], ow0 + v * VW, 1, OW,
                                                  VW);
                            const ivec m = DC_LANE_MASK(ow0 + v * VW, OW);
#pragma unroll
                            for (int kk = 0; kk < KB; ++kk)
                                acc[kk][j][v] += select((vec)0.0f, d * wp[kk], m);
                        }
                    }
                }
            }
        }
    }
#pragma unroll   /* constant bounds: acc stays in registers (no run-time indexing) */
    for (int kk = 0; kk < KB; ++kk)
#pragma unroll
        for (int j = 0; j < RB; ++j)
#pragma unroll
            for (int v = 0; v < VN; ++v) {
                const int c = g * cpg + cstart + kk;
                const int ih = qh + STRIDE_H * (t0 + j), iw = qw + STRIDE_W * (u0 + v * VW);
                if (kk >= cfirst - cstart && ih < H && iw < W)
                    DC_STORE(dx, CS_NCHW(n, c, ih, 0, C, H, W), iw, STRIDE_W, W, acc[kk][j][v], c);
            }
}
