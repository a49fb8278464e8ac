/* igemm_vector.cl: implicit GEMM for CPUs, explicit vectors along m and register tiles, no local
 * memory (implicit_gemm_common.cl gives the GEMM C = A B of each direction; no workspace).
 *
 * Kernel igemm_vector(a, b, out, IG_CONV_PARAMS, SPLITS, BAND[, CS_EPILOGUE_PARAMS]): arguments
 * as igemm_local.cl's, and BAND <= MR, the tiles each work-item takes (the host sizes it so that
 * there are enough work-items for the device).  Launch: global (ceil(M / (VK * VW)),
 * ceil(tiles / BAND), slices), any local size ((1, 1, 1) suits PoCL), M and tiles those of the
 * largest slice.  Work-item (mb, t, z) computes rows [mb * VK * VW, +VK * VW) of C at the
 * columns of tiles [t * BAND, +BAND) of slice z; the work-items of one band are neighbours, so
 * that they meet its part of B in the cache.
 *
 * A tile is TP columns of C: forward and backward data, TP neighbouring output pixels of one row
 * (the last tile of a row is shorter); backward weights, TP consecutive filter taps (c, r, s; with
 * x channels-last r, s, c: implicit_gemm_common.cl's digit order).
 * The register tile is acc[TP][VK], VK vectors of VW rows (floatVW: PoCL emits 512-bit FMAs only
 * for explicit vectors), updated by one broadcast element of B per column and k.  The reduction
 * runs in chunks of JB: a chunk of A is packed once into private memory as JB x (VK * VW)
 * vectors (rows past M are zeros) and serves all the work-item's tiles, whose accumulators wait
 * in a private stash between chunks.  Each tile runs the chunk in one of three loops, each
 * simple enough for LLVM to keep acc in registers:
 *   1. its window inside B at every k: unguarded broadcasts (constant offsets where the columns
 *      are pixels 1 or 2 apart in a channels-first B, or, for backward weights with x
 *      channels-last, TP consecutive elements of x: TAP_RUNS);
 *   2. a row tile of a channels-first B at the border: the rows of B the chunk visits are first
 *      staged, zero-padded, into private memory by masked float16 loads (once per row: forward
 *      reads each for all S taps), then read like 1 (STAGE_ROWS);
 *   3. otherwise (backward weights' taps, strides past 2, backward data with a non-finite weight,
 *      a row at the very start or end of B, a channels-last B at the border): each k tested, then
 *      each column.
 * Zeros stand for the padding (forward, backward weights: they take part in the products, the
 * semantics); for backward data they stand for absent products, which is exact only while A
 * (the weights) is finite, so a chunk holding a non-finite weight takes loop 3, which leaves those
 * products out.  Results are float32 fma sums over j in order (deterministic).
 *
 * Defines read: DIRECTION, the layouts and the epilogue's (implicit_gemm_common.cl); tunables VW,
 * VK, TP, MR, JB.
 */
#include "implicit_gemm_common.cl"

#ifndef VW
#define VW 16 /* vector width along m (8 for AVX2, 16 for AVX-512): rows per vector */
#endif
#ifndef VK
#define VK 2 /* vectors along m per work-item: VK * VW rows of C */
#endif
#ifndef TP
#define TP 8 /* columns of C per register tile (output pixels of one row; taps for weights) */
#endif
#ifndef MR
#define MR 256 /* register tiles a work-item can take (its stash), sharing each packed chunk of A */
#endif
#ifndef JB
#define JB 128 /* k step: depth of the chunk of A packed at a time */
#endif

#define MT (VK * VW)                      /* rows of C per work-item */
#define STAGE 32                          /* floats staged per row of B at a border tile */

#define ROW_TILES (DIRECTION != 2)        /* tiles are runs of one output row */
/* loop 2 stages rows of B: a row tile's columns on one row of a channels-first B */
#define STAGE_ROWS (ROW_TILES && !IG_B_LAST)
/* backward weights with x channels-last: a tile of taps may be TP consecutive elements of x */
#define TAP_RUNS (DIRECTION == 2 && IG_B_LAST)

#if VW != 4 && VW != 8 && VW != 16
#error "VW must be 4, 8 or 16"
#endif

typedef IG_CAT(float, VW) floatv;
#define IG_VLOAD IG_CAT(vload, VW)
#define IG_VSTORE IG_CAT(vstore, VW)

/* floatv w[VK]: the packed rows of A at k = jj.  IG_FMA_COLUMN(acc, w, x): acc[v] += w[v] * x
 * for the VK vectors of one column of the register tile.  Spelt out per VK: a loop, even with
 * #pragma unroll, left acc in memory (an extra store per FMA). */
#define IG_FMA1(acc, w, x, v) (acc)[v] = fma((w)[v], x, (acc)[v])
#if VK == 1
#define IG_WEIGHTS(w, pack, jj) const floatv w[1] = {IG_VLOAD((jj), pack)}
#define IG_FMA_COLUMN(acc, w, x)                                                        \
    do { const floatv x_ = (floatv)(x); IG_FMA1(acc, w, x_, 0); } while (0)
#elif VK == 2
#define IG_WEIGHTS(w, pack, jj)                                                         \
    const floatv w[2] = {IG_VLOAD(2 * (jj), pack), IG_VLOAD(2 * (jj) + 1, pack)}
#define IG_FMA_COLUMN(acc, w, x)                                                        \
    do {                                                                                \
        const floatv x_ = (floatv)(x);                                                  \
        IG_FMA1(acc, w, x_, 0); IG_FMA1(acc, w, x_, 1);                                 \
    } while (0)
#elif VK == 3
#define IG_WEIGHTS(w, pack, jj)                                                         \
    const floatv w[3] = {IG_VLOAD(3 * (jj), pack), IG_VLOAD(3 * (jj) + 1, pack),          \
                         IG_VLOAD(3 * (jj) + 2, pack)}
#define IG_FMA_COLUMN(acc, w, x)                                                        \
    do {                                                                                \
        const floatv x_ = (floatv)(x);                                                  \
        IG_FMA1(acc, w, x_, 0); IG_FMA1(acc, w, x_, 1); IG_FMA1(acc, w, x_, 2);         \
    } while (0)
#elif VK == 4
#define IG_WEIGHTS(w, pack, jj)                                                         \
    const floatv w[4] = {IG_VLOAD(4 * (jj), pack), IG_VLOAD(4 * (jj) + 1, pack),          \
                         IG_VLOAD(4 * (jj) + 2, pack), IG_VLOAD(4 * (jj) + 3, pack)}
#define IG_FMA_COLUMN(acc, w, x)                                                        \
    do {                                                                                \
        const floatv x_ = (floatv)(x);                                                  \
        IG_FMA1(acc, w, x_, 0); IG_FMA1(acc, w, x_, 1);                                 \
        IG_FMA1(acc, w, x_, 2); IG_FMA1(acc, w, x_, 3);                                 \
    } while (0)
#else
#error "VK must be 1, 2, 3 or 4"
#endif

__kernel void igemm_vector(__global const real *a, __global const real *b, __global real *out,
                           IG_CONV_PARAMS, const int SPLITS, const int BAND CS_EPI_ARGS)
{
    IgGemm d;
    ig_describe(&d, IG_CONV_ARGS, SPLITS, get_global_id(2));
    const int m0 = get_global_id(0) * MT;
    if (m0 >= d.M || d.P == 0)
        return;
#if ROW_TILES
    const int per_row = CS_DIV_UP(d.P2, TP), tiles = d.P / d.P2 * per_row;
#else
    const int tiles = CS_DIV_UP(d.P, TP);
#endif
    const int t0 = get_global_id(1) * BAND;
    if (t0 >= tiles)
        return;
    const int nt = min(BAND, tiles - t0);

    /* {{{ the columns of the tiles: B's offset, window depth, row and column, C's offset per
     * column; columns past a short tile repeat its last one (loaded, never stored) */
    int pbase[MR][TP], pdep[MR][TP], prow[MR][TP], pcol[MR][TP], pout[MR][TP], len[MR];
    int dlo[MR], dhi[MR], rlo[MR], rhi[MR], clo[MR], chi[MR];
#if TAP_RUNS
    int consecutive[MR];                  /* 1: the tile's columns are consecutive in B */
#endif
    for (int t = 0; t < nt; ++t) {
#if ROW_TILES
        const int line = (t0 + t) / per_row, first = (t0 + t) % per_row * TP;
        const int p_first = line * d.P2 + first;
        len[t] = min(TP, d.P2 - first);
#else
        const int p_first = (t0 + t) * TP;
        len[t] = min(TP, d.P - p_first);
#endif
        for (int q = 0; q < TP; ++q) {
            IgColumn c;
            ig_column(&d, p_first + min(q, len[t] - 1), &c);
            pbase[t][q] = c.plane + ((c.dep * d.BH + c.row) * d.BW + c.col) * d.b_pix;
            pdep[t][q] = c.dep;
            prow[t][q] = c.row;
            pcol[t][q] = c.col;
            pout[t][q] = c.out;
        }
        dlo[t] = dhi[t] = pdep[t][0];
        rlo[t] = rhi[t] = prow[t][0];
        clo[t] = chi[t] = pcol[t][0];
        for (int q = 1; q < TP; ++q) {
            dlo[t] = min(dlo[t], pdep[t][q]);
            dhi[t] = max(dhi[t], pdep[t][q]);
            rlo[t] = min(rlo[t], prow[t][q]);
            rhi[t] = max(rhi[t], prow[t][q]);
            clo[t] = min(clo[t], pcol[t][q]);
            chi[t] = max(chi[t], pcol[t][q]);
        }
#if TAP_RUNS
        consecutive[t] = len[t] == TP;
        for (int q = 1; q < TP; ++q)
            consecutive[t] &= pbase[t][q] == pbase[t][0] + q;
#endif
    }
    /* the range of j's share of the window's depth, row and column, over the whole reduction */
    const int jd_lo = min(0, (d.JD - 1) * d.d_j), jd_hi = max(0, (d.JD - 1) * d.d_j);
    const int jr_lo = min(0, (d.J1 - 1) * d.r_j), jr_hi = max(0, (d.J1 - 1) * d.r_j);
    const int jc_lo = min(0, (d.J2 - 1) * d.c_j), jc_hi = max(0, (d.J2 - 1) * d.c_j);
    /* }}} */

    float pack[JB * MT];                  /* A's chunk, k-major: VK vectors of rows per k */
    int jbase[JB], jdep[JB], jrow[JB], jcol[JB];  /* j's share of B's offset, depth, row, column */
    int jline[JB];                        /* j's share of the offset of its row of B */
    int jrun[JB], run_k[JB];              /* where each k reads its staged row; the first k of
                                           * each run of k on one row of B */
    floatv stash[MR][TP][VK];
    float16 stage[JB * STAGE / 16];       /* a border row tile's window rows, zero-padded */
    IgDigits one, t;
    ig_digits(&d, 1, &one);
    const int chunks = max(1, CS_DIV_UP(d.j_end - d.j_begin, JB));
    for (int chunk = 0; chunk < chunks; ++chunk) {
        const int j_first = d.j_begin + chunk * JB, jn = min(JB, d.j_end - j_first);
        bool finite = true;               /* all of A's chunk finite: zero products are zeros */
        ig_digits(&d, j_first, &t);
        for (int jj = 0; jj < jn; ++jj, ig_advance(&d, &t, &one)) {
            const int aoff = ig_a_offset(&d, &t);
            for (int l = 0; l < MT; ++l) {
                const float value = m0 + l < d.M ? (float)a[aoff + (m0 + l) * d.a_m] : 0.0f;
                pack[jj * MT + l] = value;
                finite &= isfinite(value);
            }
            jdep[jj] = t.jd * d.d_j;
            jrow[jj] = t.j1 * d.r_j;
            jcol[jj] = t.j2 * d.c_j;
            jline[jj] = t.j0 * d.b_j0 + (jdep[jj] * d.BH + jrow[jj]) * d.BW * d.b_pix;
            jbase[jj] = jline[jj] + jcol[jj] * d.b_pix;
        }
#if DIRECTION == 1
        const bool zeros_exact = finite;  /* zeros for absent products: exact unless A is not */
#else
        const bool zeros_exact = true;    /* zeros for the padding: the semantics */
#endif
        int runs = 0;
        for (int jj = 0; jj < jn; ++jj) {   /* a run: one row of B, so one row's bounds (two
                                             * rows may share an offset: a row past the last
                                             * of a plane is the next plane's first) */
            if (jj == 0 || jline[jj] != jline[jj - 1] || jrow[jj] != jrow[jj - 1]
                || jdep[jj] != jdep[jj - 1])
                run_k[runs++] = jj;
            jrun[jj] = (runs - 1) * STAGE + jcol[jj] - jc_lo;
        }
        int line_lo = jline[0], line_hi = jline[0];   /* the rows of B the chunk visits */
        for (int jj = 1; jj < jn; ++jj) {
            line_lo = min(line_lo, jline[jj]);
            line_hi = max(line_hi, jline[jj]);
        }
        for (int tile = 0; tile < nt; ++tile) {
            floatv acc[TP][VK];
#pragma unroll
            for (int q = 0; q < TP; ++q)
#pragma unroll
                for (int v = 0; v < VK; ++v)
                    acc[q][v] = chunk ? stash[tile][q][v] : (floatv)0.0f;
            const int dl = dlo[tile], dh = dhi[tile];
            const int rl = rlo[tile], rh = rhi[tile], cl = clo[tile], ch = chi[tile];
            const int base0 = pbase[tile][0];
            /* cp: how far apart in B a full tile's columns are, where that is uniform and
             * known: 1 or 2 for a row of a channels-first B (constant offsets), c_p times the
             * channels for a row of a channels-last B, 1 for taps that are consecutive elements
             * of x (TAP_RUNS); else 0 (each column's own offset) */
#if STAGE_ROWS
            const int cp = len[tile] == TP && d.c_p <= 2 ? d.c_p : 0;
#elif ROW_TILES
            const int cp = len[tile] == TP ? d.c_p * d.b_pix : 0;
#elif TAP_RUNS
            const int cp = consecutive[tile];
#else
            const int cp = 0;
#endif
            /* each tile takes one of three loops over the chunk (see the banner) */
            if (dl + jd_lo >= 0 && dh + jd_hi < d.BD && rl + jr_lo >= 0 && rh + jr_hi < d.BH
                && cl + jc_lo >= 0 && ch + jc_hi < d.BW) {
                /* 1. the window inside B at every k: unguarded loads */
                for (int jj = 0; jj < jn; ++jj) {
                    IG_WEIGHTS(wv, pack, jj);
                    __global const real *src = b + base0 + jbase[jj];
                    if (cp == 1) {
#pragma unroll
                        for (int q = 0; q < TP; ++q)
                            IG_FMA_COLUMN(acc[q], wv, (float)src[q]);
                    } else if (cp == 2) {
#pragma unroll
                        for (int q = 0; q < TP; ++q)
                            IG_FMA_COLUMN(acc[q], wv, (float)src[2 * q]);
#if IG_B_LAST
                    } else if (cp) {  /* one offset register per column, none in vectors */
#pragma unroll
                        for (int q = 0; q < TP; ++q)
                            IG_FMA_COLUMN(acc[q], wv, (float)src[q * cp]);
#endif
                    } else {
#pragma unroll
                        for (int q = 0; q < TP; ++q)
                            IG_FMA_COLUMN(acc[q], wv, (float)b[pbase[tile][q] + jbase[jj]]);
                    }
                }
            }
#if STAGE_ROWS
            else if (cp && zeros_exact && dl == dh && (TP - 1) * cp + jc_hi - jc_lo < STAGE
                       && base0 + line_lo + jc_lo >= 0
                       && base0 + line_hi + jc_lo + STAGE <= d.b_size) {
                /* 2. a row tile at the border: the window row (every column any k of the
                 * chunk reads in it) of each row of B the chunk visits staged, zero-padded, by
                 * masked float16 loads, before the loop (a store right before the loads that
                 * read it back stalls them) */
                const int16 lane = (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
                const int16 col = (int16)(cl + jc_lo) + lane;
                const int vectors = CS_DIV_UP((TP - 1) * cp + jc_hi - jc_lo + 1, 16);
                for (int r = 0; r < runs; ++r) {
                    const bool row_in = (uint)(rl + jrow[run_k[r]]) < (uint)d.BH
                                        && (uint)(dl + jdep[run_k[r]]) < (uint)d.BD;
                    for (int k = 0; k < vectors; ++k)
                        stage[r * (STAGE / 16) + k] = row_in ? select(
                            (float16)0.0f, vload16(k, b + base0 + jline[run_k[r]] + jc_lo),
                            as_uint16(col + 16 * k) < (uint16)d.BW) : (float16)0.0f;
                }
                for (int jj = 0; jj < jn; ++jj) {
                    IG_WEIGHTS(wv, pack, jj);
                    const float *staged = (const float *)stage + jrun[jj];
                    if (cp == 1) {
#pragma unroll
                        for (int q = 0; q < TP; ++q)
                            IG_FMA_COLUMN(acc[q], wv, staged[q]);
                    } else {
#pragma unroll
                        for (int q = 0; q < TP; ++q)
                            IG_FMA_COLUMN(acc[q], wv, staged[2 * q]);
                    }
                }
            }
#endif
            else {
                /* 3. otherwise: each k's window tested as a whole, then per column */
                for (int jj = 0; jj < jn; ++jj) {
                    IG_WEIGHTS(wv, pack, jj);
                    const int jt = jdep[jj], jr = jrow[jj], jc = jcol[jj], jb = jbase[jj];
                    if (dl + jt >= 0 && dh + jt < d.BD && rl + jr >= 0 && rh + jr < d.BH
                        && cl + jc >= 0 && ch + jc < d.BW) {
#if IG_B_LAST
                        if (cp) {
                            __global const real *src = b + base0 + jb;
#pragma unroll
                            for (int q = 0; q < TP; ++q)
                                IG_FMA_COLUMN(acc[q], wv, (float)src[q * cp]);
                            continue;
                        }
#endif
#pragma unroll
                        for (int q = 0; q < TP; ++q)
                            IG_FMA_COLUMN(acc[q], wv, (float)b[pbase[tile][q] + jb]);
                        continue;
                    }
#pragma unroll
                    for (int q = 0; q < TP; ++q) {
                        const bool ok = (uint)(pdep[tile][q] + jt) < (uint)d.BD
                                        && (uint)(prow[tile][q] + jr) < (uint)d.BH
                                        && (uint)(pcol[tile][q] + jc) < (uint)d.BW;
                        const float x = ok ? (float)b[pbase[tile][q] + jb] : 0.0f;
#if DIRECTION == 1
                        if (ok)   /* backward data: no product outside dy */
#endif
                            IG_FMA_COLUMN(acc[q], wv, x);
                    }
                }
            }
            if (chunk + 1 < chunks) {
#pragma unroll
                for (int q = 0; q < TP; ++q)
#pragma unroll
                    for (int v = 0; v < VK; ++v)
                        stash[tile][q][v] = acc[q][v];
                continue;
            }
            /* the last chunk: C's rows of each column, one lane at a time, with the epilogue */
            float lanes[TP][MT];
#pragma unroll
            for (int q = 0; q < TP; ++q)
#pragma unroll
                for (int v = 0; v < VK; ++v)
                    IG_VSTORE(acc[q][v], q * VK + v, (float *)lanes);
            const int rows = min(MT, d.M - m0), columns = len[tile];
            CS_EPI_VALUES(ig_epi, d.o_chan + m0);
            if (ROW_TILES && d.o_p2 == 1) {       /* a run of pixels per row of C */
                for (int l = 0; l < rows; ++l)
                    for (int q = 0; q < columns; ++q)
                        CS_EPI_STORE(ig_epi, out, pout[tile][0] + (m0 + l) * d.o_m + q,
                                     ig_epi.chan + l, lanes[q][l]);
            } else {
                for (int q = 0; q < columns; ++q)
                    for (int l = 0; l < rows; ++l)
                        CS_EPI_STORE(ig_epi, out, pout[tile][q] + (m0 + l) * d.o_m,
                                     ig_epi.chan + l, lanes[q][l]);
            }
        }
    }
}
