/* depthwise.cl: depthwise convolution (groups = C, K = C * M, multiplier M >= 1), all three
 * directions, with the borders handled inside the tile: no padding pass.
 *
 * Layouts: x NCHW, w K x 1 x R x S, y N K OH OW; all packed, float32.  Bandwidth-bound: each
 * work-group copies the input window of one channel's output tile into local memory once, zero
 * padded (tile_fill), then computes every output vector of the tile (VW pixels along the width;
 * work-items take the tile's cells in turn) from local memory with no bounds checks, for all M
 * outputs of the channel.  Tile sizes are arguments: TH rows x TWV vectors, the window's rows
 * PITCH floats apart, a multiple of VW (the host keeps rows * PITCH <= LDS).  Dynamic: sizes
 * are kernel arguments; -D FIL_H / FIL_W compile the filter size in (3x3, 7x7).
 *
 * dw_fwd(x, w, y, CS_CONV_PARAMS, TH, TWV, PITCH, PG[, CS_EPILOGUE_PARAMS])
 *   global (WG * tiles, ceil(N * C / PG)), local (WG, 1); tiles = ceil(OH / TH) *
 *   ceil(OW / (TWV * VW)); a group takes the same tile of PG planes in turn (small images).
 * dw_fwd_rows(the same arguments; PITCH unused), global (round_up(tiles * ceil(N * C / PG), WG)),
 *   local (WG): forward without staging.  CPUs (WG 1), where a copy into local memory is a copy
 *   like any other and costs more than the convolution (the window's loads hit the L1 cache
 *   anyway), and GPUs on images too small for a staged tile's work-group, whose neighbouring
 *   work-items then read neighbouring vectors (DW_UNSTAGED_ITEM).  The work-item takes its tile's
 *   output vectors in turn and reads x directly: one load per tap where the vector's whole
 *   window lies inside the plane (stride 1; two and an even shuffle at stride 2), dc_load's
 *   select at the borders, so no division or bounds check runs in the inner loop.  A row of
 *   padding adds 0 times its weights (0, or NaN where a weight is not finite, as the reference).
 *   With -D DW_BACKWARD=1 it is backward-data at stride 1 and multiplier 1, which is a forward
 *   pass over dy with the taps reversed: the host passes dy as x, dx as y and the sizes of that
 *   pass (C = K, H x W = OH x OW, OH x OW = H x W, pads (R - 1) * DIL_H - PAD_T and
 *   (S - 1) * DIL_W - PAD_L, which may be negative); positions outside dy then contribute
 *   nothing (rows skipped, products at the borders dropped by a select), as in dw_bwd.
 * dw_fwd_regs(the same arguments; TH, TWV, PITCH unused), launched as dw_fwd_rows, built with
 *   VW 1, FIL_H, FIL_W, a tile of RT_H x RT_W outputs, stride RS_H, RS_W, dilation RD_H, RD_W:
 *   forward (GPUs), each window row read once into registers (the padding's zeros, 0 times a
 *   weight as in the reference) and added into every tile row it feeds: one load a tile, not a tap.
 *   With DW_BACKWARD=1, dw_fwd_rows' reversed pass: rows and columns outside dy add nothing.
 * dw_bwd(dx, w, dy, CS_CONV_PARAMS, TH, TWV, PITCH, PG[, CS_EPILOGUE_PARAMS])
 *   Phase decomposition as in tiled.cl: a tile is TH x TWV vectors of each of the SH * SW phases
 *   of dx; the dy window of all M channels is staged (M * rows * PITCH floats).  Positions
 *   outside dy contribute nothing: with finite filters their zeros add nothing, and a channel
 *   whose filter holds inf or NaN takes a masked path that drops those products.
 *   global (WG * tiles, ceil(N * C / PG)); tiles = ceil(ceil(H / SH) / TH) *
 *   ceil(ceil(W / SW) / (TWV * VW)).
 * dw_wrw(x, dy, partial, CS_CONV_PARAMS, TH, TWV, PITCH, PR, TPI, IPT, n_first)
 *   Stage 1 of wrw.cl's two-stage reduction: work-group (p, t, channel) reduces output rows
 *   [p * PR, p * PR + PR) of the IPT images from n_first + t * IPT (TPI = 1 where IPT > 1) for
 *   the channel's M * R * S taps, TB at a time (sub-tiles of TH x TWV vectors staged as in dw_fwd;
 *   each work-item sums its cells, then the group sums the work-items in order), into
 *   partial[slot][k][0][r][s], slot = t * TPI + p.  The core's split sum adds the slots up in
 *   order.  global (WG * TPI, ceil(images / IPT) * C).
 * dw_bwd_rows(the arguments of dw_bwd; PITCH unused), launched as dw_fwd_rows, built with FIL_H
 *   and FIL_W: dw_bwd unstaged, on what dw_fwd_rows does not take (stride past 1, multiplier
 *   past 1).  The same tiles of each phase of dx; a phase's taps and their dy offsets are found once
 *   a phase, and a phase vector reads VW consecutive dy elements a tap and channel where they
 *   lie (one load inside dy; at its borders the products outside are dropped by a select,
 *   never multiplied by 0).  At SW = 2 a work-item takes both column phases of its vectors and
 *   stores them interleaved, two whole vectors of dx; at other strides lane by lane.
 * dw_wrw_rows(the same arguments; TH, TWV, PITCH unused), launched as dw_wrw: dw_wrw unstaged.
 *   A work-item walks its share of the partial tile's rows one dy vector at a time (CPUs: one
 *   item a group, the whole tile; GPUs: WG items, neighbouring ones on neighbouring vectors of
 *   a row; the tile's rows of all its images one after another), TB taps of one output channel
 *   at a time, each tap's x vector read where it lies
 *   (one load inside the plane, dc_load and a select at the borders), one accumulator per tap;
 *   lanes past a row's end are dropped in both dy and x, so only real products (padding's
 *   zeros included) sum.  A group of several items then sums its items' accumulators pairwise
 *   in local memory (WG a power of 2).
 * With CS_EPI dw_fwd and dw_bwd store the output's epilogue (convsolve_epilogue.h), each output
 * element once; dw_wrw's is the split sum's.
 *
 * Defines read: VW, WG, LDS, TB, FIL_H, FIL_W (direct_common.cl), DW_BACKWARD (dw_fwd_rows),
 * RT_H, RT_W, RS_H, RS_W, RD_H, RD_W (dw_fwd_regs, which is compiled only with RT_H),
 * CS_PRECISION, the epilogue's (CS_EPI...).
 */
#ifndef VW
#define VW 16     /* output pixels per vector, along the output width: 1, 2, 4, 8 or 16 */
#endif
#ifndef WG
#define WG 1      /* work-items per work-group (the launch's local size) */
#endif
#ifndef LDS
#define LDS 8192  /* floats of local memory for the staged window */
#endif
#ifndef TB
#define TB 9      /* taps (of M * R * S) dw_wrw accumulates at once, one vector each */
#endif

#include "direct_common.cl"

/* tile[rr * pitch + col] = t[plane + (ih0 + rr) * W + iw0 + col] for rr < rows, col < pitch
 * (a multiple of VW), 0 outside the H x W plane at offset `plane` of the tensor t of `total`
 * elements; the work-group's items share the copy, one vector (dc_load) at a time. */
inline void tile_fill(__local float *tile, __global const real *t, size_t total, size_t plane,
                      int ih0, int iw0, int rows, int pitch, int H, int W)
{
    const int chunks = pitch / VW;
    for (int u = get_local_id(0); u < rows * chunks; u += WG) {
        const int rr = u / chunks, col = u % chunks * VW, ih = ih0 + rr;
        const bool valid = ih >= 0 && ih < H;
        LSTORE(dc_load(t, total, plane + (valid ? (size_t)ih * W : 0), iw0 + col, 1, W,
                       valid ? VW : 0), tile + rr * pitch + col);
    }
}

__kernel void dw_fwd(__global const real *x, __global const real *w, __global real *y,
                     CS_CONV_PARAMS, const int TH, const int TWV, const int PITCH,
                     const int PG CS_EPI_ARGS)
{
    CS_EPI_VALUES(epi, 0);
    __local float tile[LDS];
    const int M = K / C, taps = FR * FS;
    const int tiles_w = CS_DIV_UP(OW, TWV * VW), id = get_group_id(0);
    const int oh0 = id / tiles_w * TH, ow0 = id % tiles_w * TWV * VW;
    const int nc_end = min(N * C, (int)(get_group_id(1) + 1) * PG);
    for (int nc = get_group_id(1) * PG; nc < nc_end; ++nc) {   /* PG planes per group */
        const int n = nc / C, c = nc % C;
        barrier(CLK_LOCAL_MEM_FENCE);   /* the previous plane's cells are done with the tile */
        tile_fill(tile, x, (size_t)N * C * H * W, (size_t)nc * H * W, oh0 * STRIDE_H - PAD_T,
                  ow0 * STRIDE_W - PAD_L, (TH - 1) * STRIDE_H + (FR - 1) * DIL_H + 1, PITCH,
                  H, W);
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int cell = get_local_id(0); cell < TH * TWV; cell += WG) {
            const int j = cell / TWV, v = cell % TWV, oh = oh0 + j, ow = ow0 + v * VW;
            if (oh >= OH || ow >= OW)
                continue;
            __local const float *base = tile + j * STRIDE_H * PITCH + v * VW * STRIDE_W;
            for (int m = 0; m < M; ++m) {
                __global const real *wk = w + (size_t)(c * M + m) * taps;
                vec acc = (vec)0.0f;
                UNROLL_TAPS
                for (int r = 0; r < FR; ++r)
                    UNROLL_TAPS
                    for (int s = 0; s < FS; ++s)
                        acc = fma(dc_local_load(base + r * DIL_H * PITCH + s * DIL_W, STRIDE_W),
                                  (vec)((float)wk[r * FS + s]), acc);
                DC_STORE(y, CS_NCHW(n, c * M + m, oh, 0, K, OH, OW), ow, 1, OW, acc, c * M + m);
            }
        }
    }
}

/* The unstaged kernels' work-item (dw_fwd_rows, dw_bwd_rows): a 1-D range over tiles x groups
 * of PG planes, tiles fastest, so that neighbouring items of a GPU's work-group take
 * neighbouring vectors of one plane's rows (coalesced); CPUs run one item a group.  Sets `id`
 * (the tile) and `nc_first` (the first plane); an item past the last planes (the range is
 * rounded up to the work-group) returns. */
#define DW_UNSTAGED_ITEM(tiles)                                                             \
    const size_t item_ = get_global_id(0);                                                  \
    const int id = (int)(item_ % (size_t)(tiles)), nc_first = (int)(item_ / (tiles)) * PG;  \
    if (nc_first >= N * C)                                                                  \
        return;

/* dw_fwd_rows: images of at most this many vectors a row are narrow (taken a column of vectors
 * at a time, below). */
#define NARROW_VECTORS 4

#ifndef DW_BACKWARD
#define DW_BACKWARD 0
#endif
/* dw_fwd_rows' tap t of filter wk in the order it applies them: reversed for backward-data */
#define DW_ORDER(t) (DW_BACKWARD ? FR * FS - 1 - (t) : (t))

/* The weight of tap t of filter wk: from private registers when the filter size is compiled in
 * (dw_fwd_rows loads them once a filter), else from memory. */
#ifdef FIL_W
#define DW_WEIGHTS(wk)                                                                      \
    float wt[FIL_H * FIL_W];                                                                \
    UNROLL_TAPS                                                                             \
    for (int t = 0; t < FIL_H * FIL_W; ++t)                                                 \
        wt[t] = (float)(wk)[DW_ORDER(t)];
#define DW_TAP(wk, t) wt[t]
#else
#define DW_WEIGHTS(wk)
#define DW_TAP(wk, t) ((float)(wk)[DW_ORDER(t)])
#endif

/* acc plus the product of the input vector v (tap column s) and the weight wv: FMAs inside the
 * row (DW_ALL); at its borders (DW_INSIDE) forward zeroes v's lanes outside the row (0 times
 * the weight, as the reference), backward-data drops their products (outside dy: nothing). */
#define DW_ALL(acc, s, v, wv) fma((v), (wv), (acc))
#define DW_LANES_IN(s) ((DC_LANES * STRIDE_W + iw + (s) * DIL_W >= 0) &                    \
                        (DC_LANES * STRIDE_W + iw + (s) * DIL_W < W))
#if DW_BACKWARD
#define DW_INSIDE(acc, s, v, wv) ((acc) + select((vec)0.0f, (v) * (wv), DW_LANES_IN(s)))
#else
#define DW_INSIDE(acc, s, v, wv) fma(select((vec)0.0f, (v), DW_LANES_IN(s)), (wv), (acc))
#endif

/* dw_fwd_rows' FMA chains: filter row r adds into part[r % DW_CHAINS], summed at the end, so that
 * a vector's taps are not one chain of dependent FMAs (their latency bound the kernel). */
#define DW_CHAINS 3

/* acc (an lvalue: a chain) += the taps (r, s) of filter row r on the input row q (x at the
 * vector's input column iw), each through add: DW_ALL or DW_INSIDE. */
#define DW_ROW_TAPS(acc, q, r, add)                                                         \
    do {                                                                                    \
        if (STRIDE_W == 1) {   /* two loops: a select would load both ways */               \
            UNROLL_TAPS                                                                     \
            for (int s = 0; s < FS; ++s)                                                    \
                acc = add(acc, s, GLOAD((q) + s * DIL_W), (vec)DW_TAP(wk, r * FS + s));     \
        } else {               /* stride 2: the even lanes of two vectors */                \
            UNROLL_TAPS                                                                     \
            for (int s = 0; s < FS; ++s)                                                    \
                acc = add(acc, s, DC_EVEN(GLOAD((q) + s * DIL_W), GLOAD((q) + s * DIL_W + VW)), \
                          (vec)DW_TAP(wk, r * FS + s));                                     \
        }                                                                                   \
    } while (0)

/* dw_fwd_rows' output vector at (oh, ow) of filter wk, whose window starts at input row ih and
 * column iw; cols_in: whether its columns lie inside the row at every tap. */
#define DW_FWD_VECTOR()                                                                     \
    do {                                                                                    \
        vec part[DW_CHAINS];                                                                \
        _Pragma("unroll")                                                                   \
        for (int i = 0; i < DW_CHAINS; ++i)                                                 \
            part[i] = (vec)0.0f;                                                            \
        if (cols_in && ih >= 0 && ih + span_h < H) {   /* no border in reach */             \
            UNROLL_TAPS                                                                     \
            for (int r = 0; r < FR; ++r)                                                    \
                DW_ROW_TAPS(part[r % DW_CHAINS], x + plane + (size_t)(ih + r * DIL_H) * W + iw, \
                            r, DW_ALL);                                                     \
        } else {                                                                            \
            UNROLL_TAPS                                                                     \
            for (int r = 0; r < FR; ++r) {                                                  \
                const int row = ih + r * DIL_H;                                             \
                const long first = (long)(plane + (size_t)row * W) + iw;                    \
                if (row < 0 || row >= H) {   /* outside dy (backward-data): nothing */      \
                    if (!DW_BACKWARD) {      /* padding: 0 times each weight (NaN where */  \
                        float zero = 0.0f;   /* one is not finite, as the reference) */     \
                        UNROLL_TAPS                                                         \
                        for (int s = 0; s < FS; ++s)                                        \
                            zero += 0.0f * DW_TAP(wk, r * FS + s);                          \
                        part[r % DW_CHAINS] += (vec)zero;                                   \
                    }                                                                       \
                } else if (STRIDE_W <= 2 && first >= 0 && first + span_w <= (long)total) {  \
                    DW_ROW_TAPS(part[r % DW_CHAINS], x + first, r, DW_INSIDE);              \
                } else {   /* at the tensor's ends, or strides past 2 */                    \
                    UNROLL_TAPS                                                             \
                    for (int s = 0; s < FS; ++s)                                            \
                        part[r % DW_CHAINS] = DW_INSIDE(part[r % DW_CHAINS], s,             \
                            dc_load(x, total, plane + (size_t)row * W, iw + s * DIL_W,      \
                                    STRIDE_W, W, VW), (vec)DW_TAP(wk, r * FS + s));         \
                }                                                                           \
            }                                                                               \
        }                                                                                   \
        vec acc = part[0];                                                                  \
        _Pragma("unroll")                                                                   \
        for (int i = 1; i < DW_CHAINS; ++i)                                                 \
            acc += part[i];                                                                 \
        /* a vector past the row's end spills into this item's next rows */                 \
        DC_STORE_SPILL(y, CS_NCHW(n, c * M + m, oh, 0, K, OH, OW), ow, OW, acc, c * M + m,   \
                       ow0 == 0 && oh + (ow + VW - 1) / OW < oh_end);                       \
    } while (0)

__kernel void dw_fwd_rows(__global const real *x, __global const real *w, __global real *y,
                          CS_CONV_PARAMS, const int TH, const int TWV, const int PITCH,
                          const int PG CS_EPI_ARGS)
{
    CS_EPI_VALUES(epi, 0);
    const int M = K / C, taps = FR * FS;
    const size_t total = (size_t)N * C * H * W;
    const int tiles_w = CS_DIV_UP(OW, TWV * VW);
    DW_UNSTAGED_ITEM(CS_DIV_UP(OH, TH) * tiles_w)
    const int oh0 = id / tiles_w * TH, ow0 = id % tiles_w * TWV * VW;
    const int oh_end = min(OH, oh0 + TH), ow_end = min(OW, ow0 + TWV * VW);
    /* what a vector's loads span: FR rows from ih, span_w columns from iw (stride 1 or 2) */
    const int span_h = (FR - 1) * DIL_H, span_w = (FS - 1) * DIL_W + VW * STRIDE_W;
    const int nc_end = min(N * C, nc_first + PG);
    for (int nc = nc_first; nc < nc_end; ++nc) {   /* PG planes per item */
        const int n = nc / C, c = nc % C;
        const size_t plane = (size_t)nc * H * W;
        for (int m = 0; m < M; ++m) {
            __global const real *wk = w + (size_t)(c * M + m) * taps;
            DW_WEIGHTS(wk)
            /* wide images row by row (the reads stream); narrow ones a column of vectors at a
             * time, so that the column's border masks are made once for all its rows */
            if (OW > NARROW_VECTORS * VW) {
                for (int oh = oh0; oh < oh_end; ++oh)
                    for (int ow = ow0; ow < ow_end; ow += VW) {
                        const int ih = oh * STRIDE_H - PAD_T, iw = ow * STRIDE_W - PAD_L;
                        const bool cols_in = STRIDE_W <= 2 && iw >= 0 && iw + span_w <= W;
                        DW_FWD_VECTOR();
                    }
            } else {
                for (int ow = ow0; ow < ow_end; ow += VW) {
                    const int iw = ow * STRIDE_W - PAD_L;
                    const bool cols_in = STRIDE_W <= 2 && iw >= 0 && iw + span_w <= W;
                    for (int oh = oh0; oh < oh_end; ++oh) {
                        const int ih = oh * STRIDE_H - PAD_T;
                        DW_FWD_VECTOR();
                    }
                }
            }
        }
    }
}

#ifdef RT_H
#define RW_W ((RT_W - 1) * RS_W + (FIL_W - 1) * RD_W + 1)   /* the window's columns */
#define RW_H ((RT_H - 1) * RS_H + (FIL_H - 1) * RD_H + 1)   /* and rows */

__kernel void dw_fwd_regs(__global const real *x, __global const real *w, __global real *y,
                          CS_CONV_PARAMS, const int TH, const int TWV, const int PITCH,
                          const int PG CS_EPI_ARGS)
{
    CS_EPI_VALUES(epi, 0);
    const int M = K / C, tiles_w = CS_DIV_UP(OW, RT_W);
    DW_UNSTAGED_ITEM(CS_DIV_UP(OH, RT_H) * tiles_w)
    const int oh0 = id / tiles_w * RT_H, ow0 = id % tiles_w * RT_W;
    const int ih0 = oh0 * RS_H - PAD_T, iw0 = ow0 * RS_W - PAD_L;
    const bool cols_in = iw0 >= 0 && iw0 + RW_W <= W;   /* no column of the window in padding */
#define DW_COL_IN(u) (cols_in || (uint)(iw0 + (u)) < (uint)W)   /* window column u is in x */
    const int nc_end = min(N * C, nc_first + PG);
    for (int nc = nc_first; nc < nc_end; ++nc) {   /* PG planes per item */
        const int n = nc / C, c = nc % C;
        __global const real *plane = x + (size_t)nc * H * W;
        for (int m = 0; m < M; ++m) {
            const int k = c * M + m;
            DW_WEIGHTS(w + (size_t)k * FIL_H * FIL_W)   /* wt[tap] */
            float acc[RT_H][RT_W] = {{0.0f}};
            _Pragma("unroll")
            for (int i = 0; i < RW_H; ++i) {   /* window row i feeds tile row j with tap row r */
                const bool row_in = ih0 + i >= 0 && ih0 + i < H;
                __global const real *in = plane + (long)(row_in ? ih0 + i : 0) * W + iw0;
                float row[RW_W];
                _Pragma("unroll")
                for (int u = 0; u < RW_W; ++u)   /* columns outside [0, W) are never read */
                    row[u] = row_in && DW_COL_IN(u) ? (float)in[u] : 0.0f;
                _Pragma("unroll")
                for (int j = 0; j < RT_H; ++j) {   /* (backward: a row outside dy adds nothing) */
                    const int dr = i - j * RS_H;   /* known at compile time once unrolled */
                    if (dr < 0 || dr % RD_H != 0 || dr / RD_H >= FIL_H || (DW_BACKWARD && !row_in))
                        continue;
                    _Pragma("unroll")
                    for (int o = 0; o < RT_W; ++o)
                        _Pragma("unroll")
                        for (int s = 0; s < FIL_W; ++s)   /* backward: outside dy, nothing */
                            acc[j][o] = DW_BACKWARD && !DW_COL_IN(o * RS_W + s * RD_W) ? acc[j][o] :
                                fma(row[o * RS_W + s * RD_W], wt[dr / RD_H * FIL_W + s], acc[j][o]);
                }
            }
            _Pragma("unroll")
            for (int t = 0; t < RT_H * RT_W; ++t)   /* output (t / RT_W, t % RT_W) of the tile */
                if (oh0 + t / RT_W < OH && ow0 + t % RT_W < OW)
                    CS_EPI_STORE(epi, y, CS_NCHW(n, k, oh0 + t / RT_W, ow0 + t % RT_W, K, OH, OW),
                                 k, acc[t / RT_W][t % RT_W]);
        }
    }
}
#endif

/* One tap of dw_bwd: the dy vector at window position (tr, tc) of channel m times w[k][r][s];
 * `exact` drops the lanes outside dy instead of adding their zeros (non-finite filters). */
#define DW_BWD_TAPS(exact)                                                                  \
    for (int m = 0; m < M; ++m)                                                             \
        for (int r = 0; r < FR; ++r) {                                                      \
            const int dh = qh + PAD_T - r * DIL_H;                                          \
            if (dh % STRIDE_H != 0)                                                         \
                continue;                                                                   \
            const int tr = j + dh / STRIDE_H - dlo_h;                                       \
            for (int s = 0; s < FS; ++s) {                                                  \
                const int dw = qw + PAD_L - s * DIL_W;                                      \
                if (dw % STRIDE_W != 0)                                                     \
                    continue;                                                               \
                const int tc = v * VW + dw / STRIDE_W - dlo_w;                              \
                const vec d = LLOAD(tile + (m * rows + tr) * PITCH + tc);                   \
                const float wv = (float)w[(size_t)(c * M + m) * taps + r * FS + s];         \
                if (exact) {                                                                \
                    const int oh = oh_org + tr;                                             \
                    const ivec in = (oh >= 0 && oh < OH) ? DC_LANE_MASK(ow_org + tc, OW)    \
                                                         : (ivec)0;                          \
                    acc += select((vec)0.0f, d * wv, in);                                   \
                } else {                                                                    \
                    acc = fma(d, (vec)wv, acc);                                             \
                }                                                                           \
            }                                                                               \
        }

__kernel void dw_bwd(__global real *dx, __global const real *w, __global const real *dy,
                     CS_CONV_PARAMS, const int TH, const int TWV, const int PITCH,
                     const int PG CS_EPI_ARGS)
{
    CS_EPI_VALUES(epi, 0);
    __local float tile[LDS];
    const int M = K / C, taps = FR * FS;
    const int tiles_w = CS_DIV_UP(CS_DIV_UP(W, STRIDE_W), TWV * VW), id = get_group_id(0);
    const int ih0 = id / tiles_w * TH * STRIDE_H, iw0 = id % tiles_w * TWV * VW * STRIDE_W;
    /* dy rows of phase row t of phase qh: ih0 / SH + t + (qh + PAD_T - r * DIL_H) / SH, the
     * offsets lying in [dlo_h, dhi_h]; likewise for columns */
    const int dlo_h = CS_FLOOR_DIV(PAD_T - (FR - 1) * DIL_H, STRIDE_H);
    const int dlo_w = CS_FLOOR_DIV(PAD_L - (FS - 1) * DIL_W, STRIDE_W);
    const int rows = TH + CS_FLOOR_DIV(STRIDE_H - 1 + PAD_T, STRIDE_H) - dlo_h;
    const int oh_org = ih0 / STRIDE_H + dlo_h, ow_org = iw0 / STRIDE_W + dlo_w;
    const int nc_end = min(N * C, (int)(get_group_id(1) + 1) * PG);
    for (int nc = get_group_id(1) * PG; nc < nc_end; ++nc) {   /* PG planes per group */
        const int n = nc / C, c = nc % C;
        barrier(CLK_LOCAL_MEM_FENCE);   /* the previous plane's cells are done with the tile */
        for (int m = 0; m < M; ++m)
            tile_fill(tile + m * rows * PITCH, dy, (size_t)N * K * OH * OW,
                      (size_t)(n * K + c * M + m) * OH * OW, oh_org, ow_org, rows, PITCH, OH, OW);
        bool finite = true;
        for (int i = 0; i < M * taps; ++i)
            finite = finite && isfinite((float)w[(size_t)c * M * taps + i]);
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int cell = get_local_id(0); cell < STRIDE_H * STRIDE_W * TH * TWV; cell += WG) {
            const int v = cell % TWV, j = cell / TWV % TH, q = cell / (TWV * TH);
            const int qw = q % STRIDE_W, qh = q / STRIDE_W;
            const int ih = ih0 + qh + STRIDE_H * j, iw = iw0 + qw + STRIDE_W * v * VW;
            if (ih >= H || iw >= W)
                continue;
            vec acc = (vec)0.0f;
            if (finite) {
                DW_BWD_TAPS(false)
            } else {
                DW_BWD_TAPS(true)
            }
            DC_STORE(dx, CS_NCHW(n, c, ih, 0, C, H, W), iw, STRIDE_W, W, acc, c);
        }
    }
}

__kernel void dw_wrw(__global const real *x, __global const real *dy, __global float *partial,
                     CS_CONV_PARAMS, const int TH, const int TWV, const int PITCH, const int PR,
                     const int TPI, const int IPT, const int n_first)
{
    __local float tile[LDS];
    __local float sums[WG * TB];
    const int M = K / C, taps = FR * FS, all = M * taps;
    const int p = get_group_id(0), lid = get_local_id(0), c = get_global_id(1) % C;
    const int slot = get_global_id(1) / C * TPI + p, oh_end = min(OH, (p + 1) * PR);
    const int n_begin = n_first + get_global_id(1) / C * IPT, n_end = min(N, n_begin + IPT);
    const size_t dysize = (size_t)N * K * OH * OW;
    for (int t0 = 0; t0 < all; t0 += TB) {
        int offset[TB], channel[TB];   /* tap t0 + t: window offset and dy channel */
#pragma unroll
        for (int t = 0; t < TB; ++t) {
            const int tap = min(t0 + t, all - 1), rs = tap % taps;
            offset[t] = rs / FS * DIL_H * PITCH + rs % FS * DIL_W;
            channel[t] = c * M + tap / taps;
        }
        vec acc[TB];
#pragma unroll
        for (int t = 0; t < TB; ++t)
            acc[t] = (vec)0.0f;
        for (int n = n_begin; n < n_end; ++n) {
            const size_t plane = CS_NCHW(n, c, 0, 0, C, H, W);
            for (int oh0 = p * PR; oh0 < oh_end; oh0 += TH) {
                const int th = min(TH, oh_end - oh0);
                for (int ow0 = 0; ow0 < OW; ow0 += TWV * VW) {
                    barrier(CLK_LOCAL_MEM_FENCE);
                    tile_fill(tile, x, (size_t)N * C * H * W, plane, oh0 * STRIDE_H - PAD_T,
                              ow0 * STRIDE_W - PAD_L, (th - 1) * STRIDE_H + (FR - 1) * DIL_H + 1,
                              PITCH, H, W);
                    barrier(CLK_LOCAL_MEM_FENCE);
                    for (int cell = lid; cell < th * TWV; cell += WG) {
                        const int j = cell / TWV, v = cell % TWV, ow = ow0 + v * VW;
                        if (ow >= OW)
                            continue;
                        const int lanes = min(VW, OW - ow);
                        const ivec live = DC_LANE_MASK(0, lanes);
                        __local const float *base = tile + j * STRIDE_H * PITCH + v * VW * STRIDE_W;
#pragma unroll
                        for (int t = 0; t < TB; ++t) {
                            const vec d = dc_load(dy, dysize, CS_NCHW(n, channel[t], oh0 + j, 0, K,
                                                                      OH, OW), ow, 1, OW, lanes);
                            const vec in = dc_local_load(base + offset[t], STRIDE_W);
                            acc[t] = fma(d, select((vec)0.0f, in, live), acc[t]);
                        }
                    }
                }
            }
        }
        for (int t = 0; t < TB; ++t)   /* the group's sum of each tap, work-items in order */
            sums[lid * TB + t] = dc_hsum(acc[t]);
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int t = lid; t < TB && t0 + t < all; t += WG) {
            float sum = sums[t];
            for (int i = 1; i < WG; ++i)
                sum += sums[i * TB + t];
            partial[(size_t)slot * K * taps + (size_t)c * all + t0 + t] = sum;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
}

__kernel void dw_wrw_rows(__global const real *x, __global const real *dy,
                          __global float *partial, CS_CONV_PARAMS, const int TH, const int TWV,
                          const int PITCH, const int PR, const int TPI, const int IPT,
                          const int n_first)
{
#if WG > 1
    __local float sums[TB * WG];
#endif
    const int M = K / C, taps = FR * FS, p = get_group_id(0), lid = get_local_id(0);
    const int c = get_global_id(1) % C, slot = get_global_id(1) / C * TPI + p;
    const int n_begin = n_first + get_global_id(1) / C * IPT;
    const int rows = min(OH, (p + 1) * PR) - p * PR;   /* the tile's, in each of its images */
    const int spans = (min(N, n_begin + IPT) - n_begin) * rows;   /* (image, row) pairs */
    const size_t total = (size_t)N * C * H * W;
    const size_t dysize = (size_t)N * K * OH * OW;
    const int span_h = (FR - 1) * DIL_H, span_w = (FS - 1) * DIL_W + VW * STRIDE_W;
    /* the group's items as a grid of across x down: neighbouring items take neighbouring
     * vectors of a row, each its (image, row) pairs `down` apart (one item: the whole tile in
     * row order, the steps compiled in) */
#if WG > 1
    const int across = min(WG, CS_DIV_UP(OW, VW)), down = WG / across;
#else
    const int across = 1, down = 1;
#endif
    const int first = lid < across * down ? lid / across : spans;   /* or idle */
    const int first_ow = lid % across * VW;
    for (int m = 0; m < M; ++m)
        for (int t0 = 0; t0 < taps; t0 += TB) {
            int row[TB], col[TB];   /* tap t0 + t's offsets in the window (the last tap past
                                     * the filter's end: its sums are not stored) */
            vec acc[TB];
#pragma unroll
            for (int t = 0; t < TB; ++t) {
                const int tap = min(t0 + t, taps - 1);
                row[t] = tap / FS * DIL_H;
                col[t] = tap % FS * DIL_W;
                acc[t] = (vec)0.0f;
            }
            for (int u = first; u < spans; u += down) {
                const int n = n_begin + u / rows, oh = p * PR + u % rows;
                const int ih = oh * STRIDE_H - PAD_T;
                const size_t plane = CS_NCHW(n, c, 0, 0, C, H, W);
                const size_t dy_row = CS_NCHW(n, c * M + m, oh, 0, K, OH, OW);
                const bool rows_in = ih >= 0 && ih + span_h < H;
                for (int ow = first_ow; ow < OW; ow += across * VW) {
                    const int iw = ow * STRIDE_W - PAD_L, lanes = min(VW, OW - ow);
                    const vec d = dc_load(dy, dysize, dy_row, ow, 1, OW, lanes);
                    if (rows_in && lanes == VW && STRIDE_W <= 2 && iw >= 0 && iw + span_w <= W) {
                        __global const real *q = x + plane + (size_t)ih * W + iw;
                        if (STRIDE_W == 1) {   /* two loops: a select would load both ways */
#pragma unroll
                            for (int t = 0; t < TB; ++t)
                                acc[t] = fma(d, GLOAD(q + row[t] * W + col[t]), acc[t]);
                        } else {
#pragma unroll
                            for (int t = 0; t < TB; ++t) {
                                __global const real *e = q + row[t] * W + col[t];
                                acc[t] = fma(d, DC_EVEN(GLOAD(e), GLOAD(e + VW)), acc[t]);
                            }
                        }
                    } else {   /* the window's padding as zeros; lanes past the row dropped */
                        const ivec live = DC_LANE_MASK(0, lanes);
#pragma unroll
                        for (int t = 0; t < TB; ++t) {
                            const int r = ih + row[t];
                            const long first = (long)plane + (long)r * W + iw + col[t];
                            if (r < 0 || r >= H) {   /* a row of padding */
                                acc[t] = fma(d, (vec)0.0f, acc[t]);
                            } else if (STRIDE_W == 1 && first >= 0 && first + VW <= (long)total) {
                                const ivec column = DC_LANES + iw + col[t];
                                acc[t] = fma(d, select((vec)0.0f, GLOAD(x + first),
                                                       live & (column >= 0) & (column < W)),
                                             acc[t]);
                            } else {   /* stride 2 and past, or at the tensor's ends */
                                const vec in = dc_load(x, total, plane + (size_t)r * W,
                                                       iw + col[t], STRIDE_W, W, VW);
                                acc[t] = fma(d, select((vec)0.0f, in, live), acc[t]);
                            }
                        }
                    }
                }
            }
#if WG > 1   /* the group's sum of each tap: halves added pairwise, a fixed order */
            for (int t = 0; t < TB; ++t)
                sums[t * WG + lid] = dc_hsum(acc[t]);
            for (int apart = WG / 2; apart > 0; apart /= 2) {
                barrier(CLK_LOCAL_MEM_FENCE);
                if (lid < apart)
                    for (int t = 0; t < TB; ++t)
                        sums[t * WG + lid] += sums[t * WG + lid + apart];
            }
            barrier(CLK_LOCAL_MEM_FENCE);
            for (int t = lid; t < TB && t0 + t < taps; t += WG)
                partial[((size_t)slot * K + c * M + m) * taps + t0 + t] = sums[t * WG];
            barrier(CLK_LOCAL_MEM_FENCE);   /* read before the next taps' sums are written */
#else
            for (int t = 0; t < TB && t0 + t < taps; ++t)
                partial[((size_t)slot * K + c * M + m) * taps + t0 + t] = dc_hsum(acc[t]);
#endif
        }
}

#ifdef FIL_W
/* The lanes of two vectors alternated: DW_ZIP_LO(a, b) = a0 b0 a1 b1 ..., DW_ZIP_HI the rest. */
#if VW == 16
#define DW_ZIP_LO(a, b) ((vec)((a).s0, (b).s0, (a).s1, (b).s1, (a).s2, (b).s2, (a).s3, (b).s3, \
                               (a).s4, (b).s4, (a).s5, (b).s5, (a).s6, (b).s6, (a).s7, (b).s7))
#define DW_ZIP_HI(a, b) ((vec)((a).s8, (b).s8, (a).s9, (b).s9, (a).sa, (b).sa, (a).sb, (b).sb, \
                               (a).sc, (b).sc, (a).sd, (b).sd, (a).se, (b).se, (a).sf, (b).sf))
#elif VW == 8
#define DW_ZIP_LO(a, b) ((vec)((a).s0, (b).s0, (a).s1, (b).s1, (a).s2, (b).s2, (a).s3, (b).s3))
#define DW_ZIP_HI(a, b) ((vec)((a).s4, (b).s4, (a).s5, (b).s5, (a).s6, (b).s6, (a).s7, (b).s7))
#elif VW == 4
#define DW_ZIP_LO(a, b) ((vec)((a).s0, (b).s0, (a).s1, (b).s1))
#define DW_ZIP_HI(a, b) ((vec)((a).s2, (b).s2, (a).s3, (b).s3))
#elif VW == 2
#define DW_ZIP_LO(a, b) ((vec)((a).s0, (b).s0))
#define DW_ZIP_HI(a, b) ((vec)((a).s1, (b).s1))
#else
#define DW_ZIP_LO(a, b) (a)
#define DW_ZIP_HI(a, b) (b)
#endif

__kernel void dw_bwd_rows(__global real *dx, __global const real *w, __global const real *dy,
                          CS_CONV_PARAMS, const int TH, const int TWV, const int PITCH,
                          const int PG CS_EPI_ARGS)
{
    CS_EPI_VALUES(epi, 0);
    const int M = K / C, taps = FR * FS, zip = STRIDE_W == 2;
    const int tiles_w = CS_DIV_UP(CS_DIV_UP(W, STRIDE_W), TWV * VW);
    DW_UNSTAGED_ITEM(CS_DIV_UP(CS_DIV_UP(H, STRIDE_H), TH) * tiles_w)
    const int j0 = id / tiles_w * TH, u0 = id % tiles_w * TWV * VW;   /* in a phase's grid */
    const size_t dysize = (size_t)N * K * OH * OW;
    const int nc_end = min(N * C, nc_first + PG);
    for (int nc = nc_first; nc < nc_end; ++nc) {   /* PG planes per item */
        const int n = nc / C, c = nc % C;
        for (int qh = 0; qh < STRIDE_H; ++qh) {
            /* dx row qh + SH j reads dy row j + dy_row[r] through tap row r where row_in[r] */
            int dy_row[FIL_H];
            bool row_in[FIL_H];
            for (int r = 0; r < FIL_H; ++r) {
                const int dh = qh + PAD_T - r * DIL_H;
                dy_row[r] = CS_FLOOR_DIV(dh, STRIDE_H);
                row_in[r] = dh == dy_row[r] * STRIDE_H;
            }
            const int j_end = min(j0 + TH, CS_DIV_UP(H - qh, STRIDE_H));
            for (int qw = 0; qw < STRIDE_W; qw += 1 + zip) {   /* zipped: phases qw, qw + 1 */
                /* likewise dx column qw + p + SW u reads dy column u + dy_col[p][s] */
                int dy_col[2][FIL_W];
                bool col_in[2][FIL_W];
                for (int p = 0; p < 2; ++p)
                    for (int s = 0; s < FIL_W; ++s) {
                        const int dc = qw + p + PAD_L - s * DIL_W;
                        dy_col[p][s] = CS_FLOOR_DIV(dc, STRIDE_W);
                        col_in[p][s] = (p == 0 || zip) && dc == dy_col[p][s] * STRIDE_W;
                    }
                const int u_end = min(u0 + TWV * VW, CS_DIV_UP(W - qw, STRIDE_W));
                for (int j = j0; j < j_end; ++j)
                    for (int u = u0; u < u_end; u += VW) {
                        vec acc[2] = {(vec)0.0f, (vec)0.0f};
                        for (int m = 0; m < M; ++m) {
                            __global const real *wk = w + (size_t)(c * M + m) * taps;
                            const size_t plane = (size_t)(n * K + c * M + m) * OH * OW;
#pragma unroll
                            for (int p = 0; p < 2; ++p)
                                UNROLL_TAPS
                                for (int r = 0; r < FR; ++r) {
                                    const int oh = j + dy_row[r];
                                    if (!row_in[r] || oh < 0 || oh >= OH)
                                        continue;
                                    UNROLL_TAPS
                                    for (int s = 0; s < FS; ++s) {
                                        if (!col_in[p][s])
                                            continue;
                                        const int ow = u + dy_col[p][s];
                                        const vec wv = (vec)((float)wk[r * FS + s]);
                                        if (ow >= 0 && ow + VW <= OW) {
                                            acc[p] = fma(GLOAD(dy + plane + (size_t)oh * OW + ow),
                                                         wv, acc[p]);
                                        } else {   /* dy's borders: products outside dropped */
                                            const vec d = dc_load(dy, dysize, plane +
                                                                  (size_t)oh * OW, ow, 1, OW, VW);
                                            acc[p] += select((vec)0.0f, d * wv,
                                                             DC_LANE_MASK(ow, OW));
                                        }
                                    }
                                }
                        }
                        const size_t row = CS_NCHW(n, c, qh + STRIDE_H * j, 0, C, H, W);
                        if (zip) {   /* columns qw + 2 u .. + 2 VW: the two phases alternated */
                            const int iw = qw + 2 * u;
                            DC_STORE(dx, row, iw, 1, W, DW_ZIP_LO(acc[0], acc[1]), c);
                            if (iw + VW < W)
                                DC_STORE(dx, row, iw + VW, 1, W, DW_ZIP_HI(acc[0], acc[1]), c);
                        } else {
                            DC_STORE(dx, row, qw + STRIDE_W * u, STRIDE_W, W, acc[0], c);
                        }
                    }
            }
        }
    }
}
#endif
