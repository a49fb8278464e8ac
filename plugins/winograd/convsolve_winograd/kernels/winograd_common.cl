/* winograd_common.cl: what the Winograd F(m x m, 3 x 3) kernels share, m = WINO_M, alpha = m + 2
 * (each kernel's file includes it): the 1-D transforms (winograd_transforms.cl, generated), the
 * transforms' lane vectors, runs of lanes and image-row segments dealt out to the lanes, the
 * numbering of tiles and runs, the stores of transformed tiles and of the output's epilogue,
 * the filter layouts; the GEMMs' vectors and register-tile step.
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
 * A transform work-item transforms a run of TT tiles of one tile row and one channel, one tile
 * per vector lane: it loads each image row the run touches as contiguous vectors (zero outside
 * the image), deals its columns out to the lanes (WINO_DEAL: lane t of column j = element
 * t * m + j), and stores runs of lanes to the transformed rows (wino_output does the reverse,
 * loading whole vectors: lanes past the run read the rest of the row or the workspace's next
 * region).  Range: C * rows * ceil(TW / TT) work-items, runs fastest, then tile rows, then
 * channels (channels fastest for tile-major stores); work-items past the end return at once.
 *
 * The kernels that write the convolution's output, wino_output (y, or dx) and wino_filter_out
 * (dw), apply its epilogue as they store each element (convsolve_epilogue.h: with CS_EPI they
 * take CS_EPILOGUE_PARAMS after their own; without it they are the bare kernels).
 *
 * Defines read: WINO_M (winograd_transforms.cl), TT (the transforms' lanes), VW, NV, TM, MR (the
 * GEMMs' register tile), CS_PRECISION (convsolve.h), CS_EPI and the epilogue's structure
 * (convsolve_epilogue.h).  Each kernel is built alone, from its own file: PoCL took 15-23 s to
 * build all five transforms of m = 6 at once.
 */
#ifndef WINOGRAD_COMMON_CL
#define WINOGRAD_COMMON_CL
#include "convsolve_epilogue.h"

#ifndef TT
#define TT 16 /* tiles per work-item, one per vector lane (1, 2, 4, 8 or 16) */
#endif
#ifndef VW
#define VW 16 /* vector width along the tiles (wino_gemm) or channels (wino_gemm_wrw): 1-16 */
#endif
#ifndef NV
#define NV 2 /* vectors per register-tile row; TN = NV * VW columns per panel */
#endif
#ifndef TM
#define TM 8 /* rows (output channels) per register tile; divides UPACK */
#endif
#ifndef MR
#define MR 16 /* row blocks of TM rows per work-item, over one panel */
#endif
#define TN (NV * VW)

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
#error "winograd_common.cl: TT must be 1, 2, 4, 8 or 16"
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

/* The filters.
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

/* {{{ the GEMMs' vectors and register tile
 *
 * A GEMM work-item owns a TM x TN register tile of TM x NV vectors of VW (TN = NV * VW
 * columns), fed per reduction step by TM broadcasts of one operand and NV vector loads of the
 * other (wino_gemm.cl, wino_gemm_wrw.cl). */
#if UPACK % TM != 0
#error "winograd_common.cl: TM must divide UPACK (16)"
#endif
#if VW == 1
typedef float gvec;
#define GVLOAD(p) (*(p))
#define GVSTORE(v, p) (*(p) = (v))
#else
typedef WINO_CAT(float, VW) gvec;
#define GVLOAD(p) WINO_CAT(vload, VW)(0, p)
#define GVSTORE(v, p) WINO_CAT(vstore, VW)(v, 0, p)
#endif

/* One reduction step of the TM x NV register tile acc: acc[i][j] += A(i) * brow[j * VW ..] for
 * i < TM, j < NV, A(i) being the expression a_i in the index name i.  A macro, as in the gemm
 * plugin: written as an inlined function taking acc by pointer, LLVM 15 spills the tile. */
#define WINO_GEMM_STEP(acc, i, a_i, brow)                                               \
    {                                                                                   \
        gvec b_[NV];                                                                    \
        _Pragma("unroll") for (int j_ = 0; j_ < NV; ++j_)                               \
            b_[j_] = GVLOAD((brow) + j_ * VW);                                          \
        _Pragma("unroll") for (int i = 0; i < TM; ++i) {                                \
            const gvec a_ = (gvec)(a_i);                                                \
            _Pragma("unroll") for (int j_ = 0; j_ < NV; ++j_)                           \
                (acc)[i][j_] = fma(a_, b_[j_], (acc)[i][j_]);                           \
        }                                                                               \
    }

/* acc += the product of the D x TM block of U whose step-d row starts at ua + d * UPACK and
 * the D x TN panel whose row d starts at vb + d * pitch.  Not unrolled: unrolled, LLVM 15
 * hoists the broadcasts of later steps and spills them. */
#define WINO_GEMM_LOOP(acc, ua, vb, pitch, D)                                           \
    {                                                                                   \
        __global const real *ap_ = (ua);                                                \
        __global const real *bp_ = (vb);                                                \
        for (int d_ = 0; d_ < (D); ++d_) {                                              \
            WINO_GEMM_STEP(acc, i_, ap_[i_], bp_)                                       \
            ap_ += UPACK;                                                               \
            bp_ += (pitch);                                                             \
        }                                                                               \
    }

/* }}} */

#endif
