/* igemm_local.cl: implicit GEMM for GPUs, tiles staged in local memory (implicit_gemm_common.cl
 * gives the GEMM C = A B of each direction; no workspace, nothing unfolded in global memory).
 *
 * Kernel igemm_local(a, b, out, IG_CONV_PARAMS, SPLITS[, CS_EPILOGUE_PARAMS]): a, b, out as
 * implicit_gemm_common.cl's table (forward: w, x, y; backward data: w, dy, dx; backward weights:
 * dy, x, dw or the partials); with CS_EPI, the output's epilogue values (convsolve_epilogue.h),
 * applied in the store of C.
 * Launch: local (BN / TN, BM / TM, 1); global (ceil(P / BN) * BN / TN, ceil(M / BM) * BM / TM,
 * slices), P the largest slice's (backward data: the largest phase's).  Work-group (bx, by, z)
 * computes the BM x BN block of C at (by * BM, bx * BN) of slice z.
 *
 * Each k step stages BK-deep slices of A and B in local memory, k-major: as[k][m] with rows
 * LDA = BM + PAD_A apart, bs[k][p] with rows LDB apart.  Global loads are coalesced: work-items
 * side by side load consecutive j of A (a contiguous run of w or dy), and consecutive p of B
 * (forward, backward data: neighbouring output pixels read neighbouring input pixels) or, for
 * backward weights, consecutive j (neighbouring pixels of dy and x); where B's tensor is
 * channels-last the other way round (consecutive channels: j for forward and backward data, p,
 * the taps, for backward weights; B_ALONG_J).  Each work-item loads one k
 * row of each slice (its LA rows of A, its LB columns of B): one digit state per operand, and
 * the window's share of that row (ig_b's depth, row, column and offset) computed once per
 * step for all its columns, which keep their own part in registers.  PAD_A makes stores along
 * k conflict-free: rows LDA = max(32 / BK, VW) (mod 32) apart put the BK consecutive k of a warp
 * on distinct banks (BK = 8; BK = 16 with float4 reads: two-way).
 * Work-item (tx, ty) owns rows ((u * WGM + ty) * VW + v) and columns ((u * WGN + tx) * VW + v) of
 * the block: it reads VW-wide vectors that neighbouring work-items read side by side (no bank
 * conflicts), and its stores of C along p are coalesced.  With DOUBLE_BUF the next slices travel
 * global -> registers -> the other buffer while this one is used: one barrier per k step.
 * Local memory: (1 + DOUBLE_BUF) * BK * (LDA + LDB) * 4 + 4 bytes (at most 48 KiB on NVIDIA's
 * OpenCL; configs.local_bytes).
 *
 * Backward data multiplies a zero for each dy position outside dy, which is exact unless a
 * weight is not finite; a work-group that stages a non-finite weight recomputes its block from
 * global memory leaving those products out (ig_exact), so inf and NaN land where the reference
 * puts them.  Products are float32 fma (no TF32); the sum runs over j in order, so runs repeat.
 *
 * Defines read: DIRECTION, the layouts and the epilogue's (implicit_gemm_common.cl); tunables BM,
 * BN, BK, TM, TN, VW, DOUBLE_BUF.
 */
#include "implicit_gemm_common.cl"

#ifndef BM
#define BM 64 /* rows of C (output channels; backward data: input channels) per work-group */
#endif
#ifndef BN
#define BN 64 /* columns of C (output pixels; backward weights: filter taps) per work-group */
#endif
#ifndef BK
#define BK 16 /* k step: depth of the reduction staged in local memory at a time */
#endif
#ifndef TM
#define TM 4 /* rows of C per work-item */
#endif
#ifndef TN
#define TN 4 /* columns of C per work-item */
#endif
#ifndef VW
#define VW 4 /* width of the local-memory reads (1, 2 or 4) */
#endif
#ifndef DOUBLE_BUF
#define DOUBLE_BUF 1 /* 1: two local buffers, the next k step loaded during this one */
#endif

#define WGM (BM / TM)                 /* work-items along m */
#define WGN (BN / TN)                 /* work-items along p */
#define WGS (WGM * WGN)               /* work-group size */
#define LA (BM * BK / WGS)            /* elements of A each work-item stages per k step */
#define LB (BN * BK / WGS)            /* elements of B each work-item stages per k step */
#define PAD_A ((32 / BK > VW ? 32 / BK : VW) % 32)
#define LDA (BM + PAD_A)
/* B's coalesced direction: j (backward weights' pixels of dy and x; channels of a channels-last
 * B, IG_J_INNER) or p (output pixels; channels of a channels-last x for backward weights) */
#define B_ALONG_J ((DIRECTION == 2) != IG_B_LAST)
#define LDB (B_ALONG_J ? BN + PAD_A : BN)
#define BUFS (1 + DOUBLE_BUF)

#if BM % (TM) || BN % (TN) || TM % (VW) || TN % (VW) || BM % (VW) || BN % (VW)
#error "BM, BN must be multiples of TM, TN, and those of VW"
#endif
#if (BM * BK) % WGS || (BN * BK) % WGS || WGS % BK
#error "the work-group must divide both staged slices, and BK the work-group"
#endif
#if VW != 1 && VW != 2 && VW != 4
#error "VW must be 1, 2 or 4"
#endif

#if VW == 1
typedef float floatv;
#else
typedef IG_CAT(float, VW) floatv;
#endif

/* The element of the staged slices that work-item lid's e-th load takes: (k, m) of A, (k, p) of
 * B; consecutive work-items take consecutive j (or p, for B along p: WGS / BK work-items per k
 * row, each loading every (WGS / BK)-th column).  The k row is the same for all of a work-item's
 * loads (WGS % BK == 0). */
#define IG_A_K(e, lid) (((e) * WGS + (lid)) % BK)
#define IG_A_M(e, lid) (((e) * WGS + (lid)) / BK)
#if B_ALONG_J
#define IG_B_K(e, lid) (((e) * WGS + (lid)) % BK)
#define IG_B_P(e, lid) (((e) * WGS + (lid)) / BK)
#else
#define IG_B_ROW (WGS / BK)
#define IG_B_K(e, lid) ((lid) / IG_B_ROW)
#define IG_B_P(e, lid) ((e) * IG_B_ROW + (lid) % IG_B_ROW)
#endif

/* The exact sum of backward data for one element of C: products outside dy left out. */
inline float ig_exact(const IgGemm *d, __global const real *a, __global const real *b, int m,
                      const IgColumn *col)
{
    float acc = 0.0f;
    IgDigits t, one;
    ig_digits(d, 1, &one);
    for (ig_digits(d, d->j_begin, &t); t.j < d->j_end; ig_advance(d, &t, &one))
        if (ig_b_inside(d, col, &t))
            acc = fma((float)a[ig_a_offset(d, &t) + m * d->a_m], ig_b(d, b, col, &t), acc);
    return acc;
}

__kernel __attribute__((reqd_work_group_size(WGN, WGM, 1)))
void igemm_local(__global const real *a, __global const real *b, __global real *out,
                 IG_CONV_PARAMS, const int SPLITS CS_EPI_ARGS)
{
    __local floatv as_v[BUFS][BK * LDA / VW];
    __local floatv bs_v[BUFS][BK * LDB / VW];
#if DIRECTION == 1
    __local int nonfinite;
#endif
    IgGemm d;
    ig_describe(&d, IG_CONV_ARGS, SPLITS, get_group_id(2));
    const int m_wg = get_group_id(1) * BM, p_wg = get_group_id(0) * BN;
    if (m_wg >= d.M || p_wg >= d.P)
        return;                                   /* the whole work-group: no barrier missed */
    const int tx = get_local_id(0), ty = get_local_id(1), lid = ty * WGN + tx;

    /* What this work-item loads: its k row of A and of B (the same for all its elements), and
     * the columns of B: each one's window depth, row and column before j's share, and its
     * offset in b (0 for a column past P, whose row no j brings into range). */
    IgDigits step, ta, tb;
    int b_dep[LB], b_row[LB], b_col[LB], b_at[LB];
    ig_digits(&d, BK, &step);
    ig_digits(&d, d.j_begin + IG_A_K(0, lid), &ta);
    ig_digits(&d, d.j_begin + IG_B_K(0, lid), &tb);
#pragma unroll
    for (int e = 0; e < LB; ++e) {
        IgColumn col;
        ig_column(&d, p_wg + IG_B_P(e, lid), &col);
        b_dep[e] = col.dep;
        b_row[e] = col.row;
        b_col[e] = col.col;
        b_at[e] = p_wg + IG_B_P(e, lid) < d.P
                  ? col.plane + ((col.dep * d.BH + col.row) * d.BW + col.col) * d.b_pix : 0;
    }
    bool bad = false;
#if DIRECTION == 1
    if (lid == 0)
        nonfinite = 0;
#endif

    float ra[LA], rb[LB];
    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int jn = 0; jn < TN; ++jn)
            acc[i][jn] = 0.0f;

    const int steps = CS_DIV_UP(d.j_end - d.j_begin, BK);
    for (int s = 0; s <= steps; ++s) {
        /* global -> registers: the slices of step s (zeros past the reduction and past M) */
        if (s < steps) {
            const int aoff = ig_a_offset(&d, &ta);
#pragma unroll
            for (int e = 0; e < LA; ++e) {
                const int m = m_wg + IG_A_M(e, lid);
                ra[e] = (ta.j < d.j_end && m < d.M) ? (float)a[aoff + m * d.a_m] : 0.0f;
                bad |= !isfinite(ra[e]);
            }
            /* ig_b for each column: j's share of the window depth, row, column and offset, once */
            const int dj = tb.jd * d.d_j, rj = tb.j1 * d.r_j, cj = tb.j2 * d.c_j;
            const int oj = tb.j0 * d.b_j0 + ((dj * d.BH + rj) * d.BW + cj) * d.b_pix;
#pragma unroll
            for (int e = 0; e < LB; ++e) {
                const int dep = b_dep[e] + dj, row = b_row[e] + rj, col = b_col[e] + cj;
                rb[e] = (tb.j < d.j_end && dep >= 0 && dep < d.BD && row >= 0 && row < d.BH
                         && col >= 0 && col < d.BW) ? (float)b[b_at[e] + oj] : 0.0f;
            }
            ig_advance(&d, &tb, &step);
            ig_advance(&d, &ta, &step);
        }
        /* the previous step's slices -> acc (from the buffer the last barrier completed) */
        if (s > 0) {
            const __local floatv *as = as_v[(s - 1) % BUFS], *bs = bs_v[(s - 1) % BUFS];
#pragma unroll
            for (int k = 0; k < BK; ++k) {
                float av[TM], bv[TN];
#pragma unroll
                for (int u = 0; u < TM / VW; ++u) {
                    const floatv v = as[k * (LDA / VW) + u * WGM + ty];
#if VW == 1
                    av[u] = v;
#else
                    IG_CAT(vstore, VW)(v, u, av);
#endif
                }
#pragma unroll
                for (int u = 0; u < TN / VW; ++u) {
                    const floatv v = bs[k * (LDB / VW) + u * WGN + tx];
#if VW == 1
                    bv[u] = v;
#else
                    IG_CAT(vstore, VW)(v, u, bv);
#endif
                }
#pragma unroll
                for (int i = 0; i < TM; ++i)
#pragma unroll
                    for (int jn = 0; jn < TN; ++jn)
                        acc[i][jn] = fma(av[i], bv[jn], acc[i][jn]);
            }
        }
        /* registers -> local; with one buffer, wait until every work-item has used it */
        if (s < steps) {
            if (!DOUBLE_BUF)
                barrier(CLK_LOCAL_MEM_FENCE);
            __local float *as = (__local float *)as_v[s % BUFS];
            __local float *bs = (__local float *)bs_v[s % BUFS];
#pragma unroll
            for (int e = 0; e < LA; ++e)
                as[IG_A_K(e, lid) * LDA + IG_A_M(e, lid)] = ra[e];
#pragma unroll
            for (int e = 0; e < LB; ++e)
                bs[IG_B_K(e, lid) * LDB + IG_B_P(e, lid)] = rb[e];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }

#if DIRECTION == 1
    if (bad)
        atomic_or(&nonfinite, 1);
    barrier(CLK_LOCAL_MEM_FENCE);
    const bool exact = nonfinite != 0;
#endif
    CS_EPI_VALUES(ig_epi, d.o_chan);
#pragma unroll
    for (int jn = 0; jn < TN; ++jn) {
        const int p = p_wg + ((jn / VW) * WGN + tx) * VW + jn % VW;
        if (p >= d.P)
            continue;
        IgColumn col;
        ig_column(&d, p, &col);
#pragma unroll
        for (int i = 0; i < TM; ++i) {
            const int m = m_wg + ((i / VW) * WGM + ty) * VW + i % VW;
            if (m >= d.M)
                continue;
            float value = acc[i][jn];
#if DIRECTION == 1
            if (exact)
                value = ig_exact(&d, a, b, m, &col);
#endif
            CS_EPI_STORE(ig_epi, out, col.out + m * d.o_m, ig_epi.chan + m, value);
        }
    }
}
