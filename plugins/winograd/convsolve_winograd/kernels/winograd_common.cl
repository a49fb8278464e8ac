/* wino_data.cl: the data transforms of Winograd F(m x m, 3 x 3), m = WINO_M, alpha = m + 2.
 *
 * Kernels (1-D ranges, any local size; work-items past the end return at once):
 *   wino_input       V = B^T d B of the alpha x alpha input tiles (forward, backward-data, and
 *                    x of backward-weights)
 *   wino_grad        E = A e A^T of the m x m output-gradient tiles (backward-weights)
 *   wino_output      y = A^T M A of the transformed outputs (forward, backward-data)
 *   wino_filter      U = G f G^T of the 3 x 3 filters (forward, backward-data)
 *   wino_filter_out  dw = G^T S G of the transformed weight gradient S (backward-weights)
 *
 * Tiles: the output (OH x OW) is cut into TH x TW tiles of m x m.  The tile rows of all images
 * are numbered r = n * TH + th and tiles p = r * TW + tw; a launch handles the chunk of tile rows
 * r0 .. r0 + rows - 1, whose tiles are numbered locally from 0 (P = rows * TW of them).  Input
 * tile (th, tw) reads rows th * m - pad_t .. + alpha - 1 and columns tw * m - pad_l .. +
 * alpha - 1 of its image, zero outside it (pads may be negative, which crops): the zero padding
 * takes part in the arithmetic, as in the reference.
 * Transformed data is plain rows: element (pos, c, p), pos = xi * alpha + nu, at
 * (pos * C + c) * pitch + p; backward-weights' x is tile-major instead (wino_store_tiles).
 *
 * A work-item transforms a run of TT tiles of one tile row and one channel, one tile per vector
 * lane: it loads each image row the run touches as contiguous vectors (zero outside the image),
 * deals its columns out to the lanes (WINO_DEAL: lane t of column j = element t * m + j), and
 * stores runs of lanes to the transformed rows (wino_output does the reverse, loading whole
 * vectors: lanes past the run read the rest of the row or the workspace's next region).  Range:
 * C * rows * ceil(TW / TT) work-items, runs fastest, then tile rows, then channels (channels
 * fastest for tile-major stores).
 *
 * The kernels that write the convolution's output, wino_output (y, or dx) and wino_filter_out
 * (dw), apply its epilogue as they store each element (convsolve_epilogue.h: with CS_EPI they
 * take CS_EPILOGUE_PARAMS after their own; without it they are the bare kernels).
 *
 * Defines read: WINO_M (winograd_transforms.cl), TT and WINO_KERNEL (below; building one kernel
 * at a time keeps PoCL's build time down), CS_PRECISION (convsolve.h), CS_EPI and the epilogue's
 * structure (convsolve_epilogue.h).
 */
#include "convsolve_epilogue.h"

#ifndef TT
#define TT 16 /* tiles per work-item, one per vector lane (1, 2, 4, 8 or 16) */
#endif
#ifndef WINO_KERNEL
#define WINO_KERNEL 0 /* kernel to build: 0 all, 1 input, 2 grad, 3 output, 4/5 filter(_out) */
#endif

#define WINO_CAT_(a, b) a##b
#define WINO_CAT(a, b) WINO_CAT_(a, b)
#if TT == 1
typedef float wvec;
#define SEGV (WINO_M + 2) /* scalars per image-row segment */
#else
typedef WINO_CAT(float, TT) wvec;
typedef WINO_CAT(uint, TT) wuvec;
typedef WINO_CAT(int, TT) wivec;
#define SEGV (WINO_M + 1) /* vectors per image-row segment: TT * m + 2 elements */
#endif
#if TT == 2
#define IOTA ((wuvec)(0, 1))
#elif TT == 4
#define IOTA ((wuvec)(0, 1, 2, 3))
#elif TT == 8
#define IOTA ((wuvec)(0, 1, 2, 3, 4, 5, 6, 7))
#elif TT == 16
#define IOTA ((wuvec)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15))
#elif TT != 1
#error "wino_data.cl: TT must be 1, 2, 4, 8 or 16"
#endif
#if TT == 1
#define WVLOAD(p) (*(p))
#define WVSTORE(v, p) (*(p) = (v))
#else
#define WVLOAD(p) WINO_CAT(vload, TT)(0, p)
#define WVSTORE(v, p) WINO_CAT(vstore, TT)(v, 0, p)
#endif
#define WINO_T wvec
#define WINO_INLINE inline __attribute__((always_inline))
#define UPACK 16 /* rows per panel of the transformed filter U (a multiple of TT and of TM) */
#include "winograd_transforms.cl"
#define ALPHA WINO_ALPHA

/* {{{ runs of lanes, row segments */

/* Lanes 0 .. n - 1 of v to dst[0 .. n - 1] (0 < n <= TT), in pieces of 8, 4, 2 and 1 lanes. */
WINO_INLINE void wino_store_run(__global real *dst, wvec v, int n)
{
#if TT == 1
    *dst = v;
#else
    if (n == TT) {
        WVSTORE(v, dst);
        return;
    }
#if TT == 16
    if (n & 8) {
        vstore8(v.s01234567, 0, dst);
        dst += 8;
        v.s01234567 = v.s89abcdef;
    }
#endif
#if TT >= 8
    if (n & 4) {
        vstore4(v.s0123, 0, dst);
        dst += 4;
        v.s0123 = v.s4567;
    }
#endif
#if TT >= 4
    if (n & 2) {
        vstore2(v.s01, 0, dst);
        dst += 2;
        v.s01 = v.s23;
    }
#endif
    if (n & 1)
        *dst = v.s0;
#endif
}

#if CS_EPI
/* The vector whose lanes 0 .. n - 1 are src[0 .. n - 1] (0 < n <= TT), the rest zero, loaded in
 * pieces as wino_store_run stores them: nothing past the run is read (the next elements belong
 * to another row, maybe another work-item's). */
WINO_INLINE wvec wino_load_run(const __global real *src, int n)
{
#if TT == 1
    return *src;
#else
    if (n == TT)
        return WVLOAD(src);
    float t[TT] = {0.0f};
    int l = 0;
#if TT == 16
    if (n & 8) {
        vstore8(vload8(0, src), 0, t);
        l = 8;
    }
#endif
#if TT >= 8
    if (n & 4) {
        vstore4(vload4(0, src + l), 0, t + l);
        l += 4;
    }
#endif
#if TT >= 4
    if (n & 2) {
        vstore2(vload2(0, src + l), 0, t + l);
        l += 2;
    }
#endif
    if (n & 1)
        t[l] = src[l];
    return WVLOAD(t);
#endif
}

/* y[at ..] = the epilogue of the run of `live` lanes v of channel k: z and the prior y are read
 * at the same elements (WINO_LOAD_LIVE), before they are written. */
#define WINO_LOAD_LIVE(p, at) wino_load_run((p) + (at), live)
WINO_INLINE void wino_store_epilogue(__global real *y, size_t at, wvec v, int live, int k,
                                     const cs_epilogue e)
{
    CS_EPILOGUE(wvec, WINO_LOAD_LIVE, e, v, k, y, at);
    wino_store_run(y + at, v, live);
}
#endif

/* WINO_STORE_RUN(y, p, v, n, k) stores the run of n lanes v of channel k at p, a pointer into
 * the output y: with CS_EPI, their epilogue (the kernel's values `epi`, CS_EPI_VALUES); bare, as
 * they are (the bare kernels are unchanged). */
#if CS_EPI
#define WINO_STORE_RUN(y, p, v, n, k) wino_store_epilogue(y, (p) - (y), v, n, k, epi)
#else
#define WINO_STORE_RUN(y, p, v, n, k) wino_store_run(p, v, n)
#endif

/* s[q] lane l = image row `row` at column c0 + q * TT + l for the first `used` elements, zero
 * outside columns 0 .. W - 1 or when the row lies outside the image (`inside` false).  `room`
 * is how many elements the tensor has from row[0] on and `back` how many before it: a vector
 * that straddles an edge of the row is loaded whole where the tensor holds it (neighbouring
 * rows' elements masked to zero, a select: their NaN do not leak), else lane by lane. */
WINO_INLINE void wino_load_segment(wvec s[SEGV], __global const real *row, bool inside, int c0,
                                   int W, int used, long back, long room)
{
#pragma unroll
    for (int q = 0; q < SEGV; ++q) {
        const int c = c0 + q * TT;
        if (!inside || q * TT >= used || c >= W || c + TT <= 0) {
            s[q] = (wvec)0.0f;
        } else if (c >= 0 && c + TT <= W) {
            s[q] = WVLOAD(row + c);
#if TT > 1
        } else if (c >= -back && c + TT <= room) {
            const wivec column = WINO_CAT(as_int, TT)(IOTA) + c;
            s[q] = select((wvec)0.0f, WVLOAD(row + c), column >= 0 && column < W);
#endif
        } else {
            float t[TT];
#pragma unroll 1
            for (int l = 0; l < TT; ++l)
                t[l] = c + l >= 0 && c + l < W ? row[c + l] : 0.0f;
#if TT == 1
            s[q] = t[0];
#else
            s[q] = WVLOAD(t);
#endif
        }
    }
}

/* WINO_DEAL(s, J): the vector whose lane t is element t * m + J of the segment s (J < alpha, a
 * literal).  WINO_INTERLEAVE(o, Q): vector Q (a literal < m) of the row o[0 .. m - 1]
 * interleaved, lane l being element e = Q * TT + l of o[0] lane 0, o[1] lane 0, ..., o[m - 1]
 * lane 0, o[0] lane 1, ... (e -> o[e % m] lane e / m).  With clang (PoCL) these are
 * __builtin_shufflevector calls of two vectors with constant lanes (one vpermt2ps each on
 * AVX-512), the parts blended by constant masks; elsewhere OpenCL's shuffle2, whose masks PoCL
 * does not fold (it extracts and inserts lane by lane). */
#if TT == 1
#define WINO_DEAL(s, J) (s)[J]
#define WINO_INTERLEAVE(o, Q) (o)[Q]
#elif defined(__clang__)
#define WINO_L2(F, A, B, o) F(A, B, (o)), F(A, B, (o) + 1)
#define WINO_L4(F, A, B, o) WINO_L2(F, A, B, o), WINO_L2(F, A, B, (o) + 2)
#define WINO_L8(F, A, B, o) WINO_L4(F, A, B, o), WINO_L4(F, A, B, (o) + 4)
#define WINO_L16(F, A, B, o) WINO_L8(F, A, B, o), WINO_L8(F, A, B, (o) + 8)
#define WINO_LANES(F, A, B) WINO_CAT(WINO_L, TT)(F, A, B, 0) /* F(A, B, l) for each lane l */
#define WINO_PAIR_LANE(v) ((v) >= 0 && (v) < 2 * TT ? (v) : -1) /* -1: lane not taken */
#define WINO_DEAL_LANE(J, base, l) WINO_PAIR_LANE((l) * WINO_M + (J) - (base))
#define WINO_SEG(s, h) (s)[(h) < SEGV ? (h) : SEGV - 1]
#define WINO_DEAL_PART(s, J, h)                                                        \
    __builtin_shufflevector(WINO_SEG(s, h), WINO_SEG(s, (h) + 1),                      \
                            WINO_LANES(WINO_DEAL_LANE, J, (h) * TT))
#define WINO_DEAL_FROM(J, h) ((wivec)(IOTA * WINO_M + (J) >= (wuvec)((h) * TT)))
#define WINO_DEAL(s, J)                                                                \
    select(select(select(WINO_DEAL_PART(s, J, 0), WINO_DEAL_PART(s, J, 2),             \
                         WINO_DEAL_FROM(J, 2)),                                        \
                  WINO_DEAL_PART(s, J, 4), WINO_DEAL_FROM(J, 4)),                      \
           WINO_DEAL_PART(s, J, 6), WINO_DEAL_FROM(J, 6))
#define WINO_ILV_E(Q, l) ((Q) * TT + (l))
#define WINO_ILV_LANE(Q, a, l)                                                         \
    WINO_PAIR_LANE(WINO_ILV_E(Q, l) % WINO_M == (a) ? WINO_ILV_E(Q, l) / WINO_M          \
                   : WINO_ILV_E(Q, l) % WINO_M == (a) + 1 ? WINO_ILV_E(Q, l) / WINO_M + TT \
                   : -1)
#define WINO_ILV_PART(o, Q, a)                                                         \
    __builtin_shufflevector((o)[(a) < WINO_M ? (a) : 0], (o)[(a) + 1 < WINO_M ? (a) + 1 : 0], \
                            WINO_LANES(WINO_ILV_LANE, Q, a))
#define WINO_ILV_MASK(Q, a) ((wivec)(((IOTA + (Q) * TT) % WINO_M) / 2 == (wuvec)((a) / 2)))
#define WINO_INTERLEAVE(o, Q)                                                          \
    select(select(WINO_ILV_PART(o, Q, 0), WINO_ILV_PART(o, Q, 2), WINO_ILV_MASK(Q, 2)),  \
           WINO_ILV_PART(o, Q, 4), WINO_ILV_MASK(Q, 4))
#else
WINO_INLINE wvec wino_deal(const wvec s[SEGV], const int j)
{
    const wuvec index = IOTA * WINO_M + j;
    wvec r = (wvec)0.0f;
    for (int h = 0; h < SEGV; h += 2) {
        const wvec part = shuffle2(s[h], s[h + 1 < SEGV ? h + 1 : h], index - h * TT);
        r = select(r, part, (wivec)(index / (2 * TT) == (wuvec)(h / 2)));
    }
    return r;
}

WINO_INLINE wvec wino_interleave(const wvec o[WINO_M], const int q)
{
    const wuvec e = IOTA + q * TT;
    const wuvec lane = e / WINO_M, source = e % WINO_M;
    wvec r = (wvec)0.0f;
    for (int a = 0; a < WINO_M; a += 2) {
        const wuvec pick = select(lane, lane + TT, (wivec)(source == (wuvec)(a + 1)));
        const wvec part = shuffle2(o[a], o[a + 1], pick);
        r = select(r, part, (wivec)(source / 2 == (wuvec)(a / 2)));
    }
    return r;
}
#define WINO_DEAL(s, J) wino_deal(s, J)
#define WINO_INTERLEAVE(o, Q) wino_interleave(o, Q)
#endif

/* row[j] = WINO_DEAL(s, j) for j < n (n <= 8; row has 8 elements). */
#define WINO_DEAL_ROW(row, s, n)                                                       \
    {                                                                                  \
        row[0] = WINO_DEAL(s, 0);                                                      \
        row[1] = WINO_DEAL(s, 1);                                                      \
        if (2 < (n)) row[2] = WINO_DEAL(s, 2);                                         \
        if (3 < (n)) row[3] = WINO_DEAL(s, 3);                                         \
        if (4 < (n)) row[4] = WINO_DEAL(s, 4);                                         \
        if (5 < (n)) row[5] = WINO_DEAL(s, 5);                                         \
        if (6 < (n)) row[6] = WINO_DEAL(s, 6);                                         \
        if (7 < (n)) row[7] = WINO_DEAL(s, 7);                                         \
    }

/* }}} */

/* Where the run of work-item gid starts: channel c, tile row r (in the chunk), first tile tw0,
 * live tiles nt; false past the end.  Runs are numbered run fastest, then tile row, then
 * channel, or (channel_fastest) channel fastest: neighbouring work-items then store to the
 * same cache lines of tile-major rows. */
WINO_INLINE bool wino_run(int gid, int C, int rows, int TW, bool channel_fastest, int *c,
                          int *r, int *tw0, int *nt)
{
    const int runs = CS_DIV_UP(TW, TT);
    if (gid >= runs * rows * C)
        return false;
    const int run = channel_fastest ? gid / C : gid;
    *tw0 = (run % runs) * TT;
    *r = (run / runs) % rows;
    *c = channel_fastest ? gid % C : gid / (runs * rows);
    *nt = min(TT, TW - *tw0);
    return true;
}

/* The transformed alpha x alpha vectors o of a run of nt tiles from tile p of channel c to out:
 * plain rows (rows of `pitch` per channel, C per position) when `lanes` is 0, else tile-major
 * rows for backward-weights, [pos][p][g][Cgpad] (rows of `lanes` elements, `rows` tiles per
 * position, channel c at column (c / Cg) * Cgpad + c % Cg), stored lane by lane. */
WINO_INLINE void wino_store_tiles(__global real *out, wvec o[ALPHA * ALPHA], int C, int c,
                                  int p, int nt, int pitch, int lanes, int rows, int Cg,
                                  int Cgpad)
{
    if (!lanes) {
#pragma unroll
        for (int k = 0; k < ALPHA; ++k)
#pragma unroll
            for (int l = 0; l < ALPHA; ++l)
                wino_store_run(out + ((size_t)(k * ALPHA + l) * C + c) * pitch + p,
                               o[k * ALPHA + l], nt);
        return;
    }
    __global real *base = out + (size_t)p * lanes + (c / Cg) * Cgpad + c % Cg;
#pragma unroll
    for (int k = 0; k < ALPHA; ++k)
#pragma unroll
        for (int l = 0; l < ALPHA; ++l) {
            float v[TT];
            WVSTORE(o[k * ALPHA + l], v);
            __global real *dst = base + (size_t)(k * ALPHA + l) * rows * lanes;
            for (int t = 0; t < nt; ++t)
                dst[(size_t)t * lanes] = v[t];
        }
}

#if WINO_KERNEL == 0 || WINO_KERNEL == 1
/* Transformed input tiles: out(pos, c, p) = (B^T d B)[pos] of input tile p of channel c, in
 * plain rows (lanes = 0) or, for backward-weights, tile-major rows of `lanes` elements
 * (wino_store_tiles).  Rows from Hl and columns from Wl on (<= H, W) read as zero: no valid
 * output reads them (a partial last tile would), so a NaN there reaches no output. */
__kernel void wino_input(__global const real *x, __global real *out, const int out_off,
                         const int N, const int C, const int H, const int W, const int Hl,
                         const int Wl, const int pad_t, const int pad_l, const int TH,
                         const int TW, const int r0, const int rows, const int pitch,
                         const int lanes, const int Cg, const int Cgpad)
{
    int c, r, tw0, nt;
    if (!wino_run(get_global_id(0), C, rows, TW, lanes > 0, &c, &r, &tw0, &nt))
        return;
    const int n = (r0 + r) / TH, th = (r0 + r) % TH;
    __global const real *plane = x + CS_NCHW(n, c, 0, 0, C, H, W);
    wvec d[ALPHA][8], t[ALPHA * ALPHA], o[ALPHA * ALPHA];
#pragma unroll 1 /* rolled: unrolled, m = 6 took 15 s to build on PoCL, and ran no faster */
    for (int i = 0; i < ALPHA; ++i) {
        const int ih = th * WINO_M - pad_t + i;
        const bool inside = ih >= 0 && ih < Hl;
        wvec s[SEGV];
        const long back = (long)((plane - x) + (size_t)(inside ? ih : 0) * W);
        wino_load_segment(s, plane + (size_t)(inside ? ih : 0) * W, inside,
                          tw0 * WINO_M - pad_l, Wl, nt * WINO_M + 2, back,
                          (long)N * C * H * W - back);
        WINO_DEAL_ROW(d[i], s, ALPHA)
    }
#pragma unroll
    for (int i = 0; i < ALPHA; ++i)
        wino_bt(d[i], 1, t + i * ALPHA, 1);    /* t[i][l] = sum_j B^T[l][j] d[i][j] */
#pragma unroll
    for (int l = 0; l < ALPHA; ++l)
        wino_bt(t + l, ALPHA, o + l, ALPHA);  /* o[k][l] = sum_i B^T[k][i] t[i][l] */
    wino_store_tiles(out + out_off, o, C, c, r * TW + tw0, nt, pitch, lanes, rows * TW, Cg,
                     Cgpad);
}
#endif

#if WINO_KERNEL == 0 || WINO_KERNEL == 2
/* Transformed output-gradient tiles: out(pos, k, p) = (A e A^T)[pos] of the m x m tile p of
 * channel k of dy (K x OH x OW per image), zero past OH, OW. */
__kernel void wino_grad(__global const real *dy, __global real *out, const int out_off,
                        const int N, const int K, const int OH, const int OW, const int TH,
                        const int TW,
                        const int r0, const int rows, const int pitch)
{
    int k, r, tw0, nt;
    if (!wino_run(get_global_id(0), K, rows, TW, false, &k, &r, &tw0, &nt))
        return;
    const int n = (r0 + r) / TH, th = (r0 + r) % TH;
    __global const real *plane = dy + CS_NCHW(n, k, 0, 0, K, OH, OW);
    wvec e[WINO_M][8], t[WINO_M * ALPHA], o[ALPHA * ALPHA];
#pragma unroll 1 /* rolled, as in wino_input */
    for (int i = 0; i < WINO_M; ++i) {
        const int oh = th * WINO_M + i;
        const bool inside = oh < OH;
        wvec s[SEGV];
        const long back = (long)((plane - dy) + (size_t)(inside ? oh : 0) * OW);
        wino_load_segment(s, plane + (size_t)(inside ? oh : 0) * OW, inside, tw0 * WINO_M, OW,
                          nt * WINO_M, back, (long)N * K * OH * OW - back);
        WINO_DEAL_ROW(e[i], s, WINO_M)
    }
#pragma unroll
    for (int i = 0; i < WINO_M; ++i)
        wino_a(e[i], 1, t + i * ALPHA, 1);     /* t[i][l] = sum_j A[l][j] e[i][j] */
#pragma unroll
    for (int l = 0; l < ALPHA; ++l)
        wino_a(t + l, ALPHA, o + l, ALPHA);   /* o[k][l] = sum_i A[k][i] t[i][l] */
    wino_store_tiles(out + out_off, o, K, k, r * TW + tw0, nt, pitch, 0, 0, 1, 1);
}
#endif

#if WINO_KERNEL == 0 || WINO_KERNEL == 3
/* Output tiles: y[n][k][th * m + i][tw * m + j] = (A^T M A)[i][j], M in plain rows (K
 * channels, `rows` tile rows of the chunk), and its epilogue with CS_EPI; elements past OH, OW
 * are not stored. */
__kernel void wino_output(__global const real *mm, const int mm_off, __global real *y,
                          const int K, const int OH, const int OW, const int TH, const int TW,
                          const int r0, const int rows, const int pitch CS_EPI_ARGS)
{
    int k, r, tw0, nt;
    if (!wino_run(get_global_id(0), K, rows, TW, false, &k, &r, &tw0, &nt))
        return;
    CS_EPI_VALUES(epi, 0);
    const int n = (r0 + r) / TH, th = (r0 + r) % TH;
    __global const real *base = mm + mm_off + (size_t)k * pitch + r * TW + tw0;
    wvec v[ALPHA][ALPHA], t[ALPHA * WINO_M], o[WINO_M * WINO_M];
#pragma unroll
    for (int i = 0; i < ALPHA; ++i)
#pragma unroll
        for (int j = 0; j < ALPHA; ++j)
            v[i][j] = WVLOAD(base + (size_t)(i * ALPHA + j) * K * pitch);
#pragma unroll
    for (int i = 0; i < ALPHA; ++i)
        wino_at(v[i], 1, t + i * WINO_M, 1);    /* t[i][j] = sum_l A^T[j][l] v[i][l] */
#pragma unroll
    for (int j = 0; j < WINO_M; ++j)
        wino_at(t + j, WINO_M, o + j, WINO_M);  /* o[i][j] = sum_l A^T[i][l] t[l][j] */
    const int c0 = tw0 * WINO_M, width = min(nt * WINO_M, OW - c0);
#pragma unroll 1 /* rolled, as in wino_input */
    for (int i = 0; i < WINO_M; ++i) {
        const int oh = th * WINO_M + i;
        if (oh >= OH)
            break;
        __global real *at = y + CS_NCHW(n, k, oh, c0, K, OH, OW);
        wvec *oi = o + i * WINO_M;
        WINO_STORE_RUN(y, at, WINO_INTERLEAVE(oi, 0), min(TT, width), k);
        if (TT < width)
            WINO_STORE_RUN(y, at + TT, WINO_INTERLEAVE(oi, 1), min(TT, width - TT), k);
        if (2 < WINO_M && 2 * TT < width)
            WINO_STORE_RUN(y, at + 2 * TT, WINO_INTERLEAVE(oi, 2), min(TT, width - 2 * TT), k);
        if (3 < WINO_M && 3 * TT < width)
            WINO_STORE_RUN(y, at + 3 * TT, WINO_INTERLEAVE(oi, 3), min(TT, width - 3 * TT), k);
        if (4 < WINO_M && 4 * TT < width)
            WINO_STORE_RUN(y, at + 4 * TT, WINO_INTERLEAVE(oi, 4), min(TT, width - 4 * TT), k);
        if (5 < WINO_M && 5 * TT < width)
            WINO_STORE_RUN(y, at + 5 * TT, WINO_INTERLEAVE(oi, 5), min(TT, width - 5 * TT), k);
    }
}
#endif

/* {{{ filters
 *
 * Weights w are K x (C / G) x 3 x 3.  U, the GEMM's broadcast operand, is laid out in panels of
 * UPACK rows, [pos][g][row / UPACK][d][row % UPACK], `row` being the GEMM's output channel
 * within the group and d its reduction index; rows past Rows repeat the last one.  Forward:
 * rows are the K / G output channels, d the C / G input channels, f = w[g * Rows + row][d].
 * Backward-data (flip = 1) convolves dy with the rotated, transposed filter: rows are the C / G
 * input channels, d the K / G output channels, f[r][s] = w[g * D + d][row][2 - r][2 - s].  A
 * work-item transforms TT filters of adjacent rows, one per lane.  S, the transformed weight
 * gradient, is laid out [pos][k][c], rows of Cgpad (C / G rounded up to 32; the columns past
 * C / G are the GEMM's garbage).
 * Positions are `plane` elements apart (a little more than a position's elements, so that the
 * alpha^2 positions a work-item touches do not all fall into the same cache sets). */

#if WINO_KERNEL == 0 || WINO_KERNEL == 4
/* U(pos, g, d, row) = (G f G^T)[pos] for the filters f of (g, d, rows row0 .. row0 + TT - 1). */
__kernel void wino_filter(__global const real *w, __global real *u, const int u_off,
                          const int plane, const int Rows, const int D, const int G,
                          const int flip)
{
    const int panels = CS_DIV_UP(Rows, UPACK), blocks = panels * (UPACK / TT);
    const int gid = get_global_id(0);
    if (gid >= blocks * D * G)
        return;
    /* rows fastest: neighbouring work-items store neighbouring runs of U (d fastest, which
     * reads w in order for forward, was 1.4x slower: the stores are what costs) */
    const int b = gid % blocks, d = (gid / blocks) % D;
    const int row0 = b * TT, g = gid / (blocks * D);
    float taps[3][3][TT];
    for (int t = 0; t < TT; ++t) {
        const int row = min(row0 + t, Rows - 1);
        __global const real *src = flip ? w + ((size_t)(g * D + d) * Rows + row) * 9
                                        : w + ((size_t)(g * Rows + row) * D + d) * 9;
        for (int r = 0; r < 3; ++r)
            for (int c = 0; c < 3; ++c)
                taps[r][c][t] = flip ? src[(2 - r) * 3 + 2 - c] : src[r * 3 + c];
    }
    wvec f[3][3], t[3 * ALPHA], o[ALPHA * ALPHA];
#pragma unroll
    for (int r = 0; r < 3; ++r)
#pragma unroll
        for (int c = 0; c < 3; ++c)
            f[r][c] = WVLOAD(taps[r][c]);
#pragma unroll
    for (int r = 0; r < 3; ++r)
        wino_g(f[r], 1, t + r * ALPHA, 1);    /* t[r][l] = sum_s G[l][s] f[r][s] */
#pragma unroll
    for (int l = 0; l < ALPHA; ++l)
        wino_g(t + l, ALPHA, o + l, ALPHA);   /* o[k][l] = sum_r G[k][r] t[r][l] */
    __global real *dst = u + u_off + (((size_t)g * panels + row0 / UPACK) * D + d) * UPACK
                         + row0 % UPACK;
#pragma unroll
    for (int k = 0; k < ALPHA; ++k)
#pragma unroll
        for (int l = 0; l < ALPHA; ++l)
            WVSTORE(o[k * ALPHA + l], dst + (size_t)(k * ALPHA + l) * plane);
}
#endif

#if WINO_KERNEL == 0 || WINO_KERNEL == 5
/* dw[k][c][r][s] = (G^T S[.][k][c] G)[r][s] for TT adjacent c, S in [pos][k][Cgpad] at
 * sum_off, and its epilogue (alpha, blend) with CS_EPI. */
__kernel void wino_filter_out(__global const real *sum, const int sum_off, const int plane,
                              __global real *dw, const int K, const int Cg,
                              const int Cgpad CS_EPI_ARGS)
{
    const int blocks = CS_DIV_UP(Cg, TT);
    const int gid = get_global_id(0);
    if (gid >= blocks * K)
        return;
    const int c0 = (gid % blocks) * TT, k = gid / blocks;
    const int live = min(TT, Cg - c0);
    CS_EPI_VALUES(epi, 0);
    __global const real *src = sum + sum_off + (size_t)k * Cgpad + c0;
    wvec v[ALPHA][ALPHA], t[ALPHA * 3], o[3 * 3];
#pragma unroll
    for (int i = 0; i < ALPHA; ++i)
#pragma unroll
        for (int j = 0; j < ALPHA; ++j) {
            v[i][j] = WVLOAD(src + (size_t)(i * ALPHA + j) * plane); /* inside Cgpad */
        }
#pragma unroll
    for (int i = 0; i < ALPHA; ++i)
        wino_gt(v[i], 1, t + i * 3, 1);      /* t[i][s] = sum_j G^T[s][j] v[i][j] */
#pragma unroll
    for (int s = 0; s < 3; ++s)
        wino_gt(t + s, 3, o + s, 3);         /* o[r][s] = sum_i G^T[r][i] t[i][s] */
    float taps[3][3][TT];
#pragma unroll
    for (int r = 0; r < 3; ++r)
#pragma unroll
        for (int s = 0; s < 3; ++s)
            WVSTORE(o[r * 3 + s], taps[r][s]);
    const size_t at = ((size_t)k * Cg + c0) * 9;
    for (int l = 0; l < live; ++l)
        for (int r = 0; r < 3; ++r)
            for (int s = 0; s < 3; ++s)
                CS_EPI_STORE(epi, dw, at + l * 9 + r * 3 + s, k, taps[r][s][l]);
}
#endif

/* }}} */
