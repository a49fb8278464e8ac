/* gemm.cl: batched SGEMM, C = alpha * op(A) * op(B) + beta * C, for the GEMM solvers.
 *
 * Layouts (all row-major, element offsets and leading dimensions in elements):
 *   op(A) is M x K:  TRANS_A == 0: A[m * lda + k]   (A stored M x K)
 *                    TRANS_A == 1: A[k * lda + m]   (A stored K x M)
 *   op(B) is K x N:  TRANS_B == 0: B[k * ldb + n]   (B stored K x N)
 *                    TRANS_B == 1: B[n * ldb + k]   (B stored N x K)
 *   C is M x N:      C[m * ldc + n]
 *   Batch b = get_global_id(2) uses A + offA + b * strideA, B + offB + b * strideB and
 *   C + offC + b * strideC (one launch runs every group of a grouped convolution).
 *   beta == 0 does not read C (C may hold garbage, NaN included).
 *
 * Kernel (one name for every variant):
 *   gemm(int M, int N, int K, real alpha, real beta,
 *        const global real *A, int offA, int lda, int strideA,
 *        const global real *B, int offB, int ldb, int strideB,
 *        global real *C, int offC, int ldc, int strideC)
 *   local size  = (WGD_N, WGD_M, 1)                       (required: reqd_work_group_size)
 *   global size = (CS_DIV_UP(N, NWG) * WGD_N, CS_DIV_UP(M, MWG) * WGD_M, batch)
 *   M, N, K >= 0 arbitrary (edge tiles are bounds-checked; full tiles take a fast path).
 *   Sizes, offsets and strides are arguments, so one build serves every problem of a config.
 *
 * Work decomposition: a work-group computes an MWG x NWG tile of C (MWG = TM * WGD_M * MR,
 * NWG = TN * WGD_N); each work-item holds a TM x TN register tile as TM x (TN / VW) vectors of
 * VW columns. In row block r < MR, work-item (lx, ly) owns
 *   rows    m_wg0 + r * TM * WGD_M + ((i / VWM) * WGD_M + ly) * VWM + i % VWM,   i < TM
 *   columns n_wg0 + ((j * WGD_N) + lx) * VW + l,                 j < TN / VW, l < VW
 * so VWM == TM and WGD_N == 1 give contiguous rows/columns (CPU), and VWM, VW < TM, TN give
 * the strided layout that keeps local-memory reads conflict-free (GPU).
 *
 * Three code paths:
 *   USE_LOCAL == 0, MR == 1 (the defaults): every work-item streams its rows of op(A) and columns of op(B)
 *      straight from global memory, the register tile as explicit vectors (CPU). TRANS_B == 1
 *      makes every B vector a gather, and ldb * 4 bytes a multiple of 4 KiB halves the speed
 *      (all of op(B)'s column panel falls in one L1 set).
 *   USE_LOCAL == 0, MR > 1: a work-item owns MR row blocks; for each KB-deep
 *      k-block it packs its KB x TN block of op(B) into private memory (gathers for TRANS_B,
 *      bounds for edge columns, all once) and runs the MR register tiles over it in turn,
 *      parking them in a private stash. Immune to the ldb aliasing above.
 *   USE_LOCAL == 1 (GPU, needs MR == 1): the work-group stages KWG-deep slices of op(A) and
 *      op(B) in local memory (k-major; transposition absorbed in the staging), optionally
 *      double-buffered with a register prefetch of the next slice.
 *
 * Defines read (tunables, each with a default below): TRANS_A, TRANS_B, WGD_M, WGD_N, TM, TN,
 * VW, VWM, KU, USE_LOCAL, MR, KB, KWG, DOUBLE_BUF, LPAD; from convsolve.h: CS_PRECISION.
 * Derived (defined here): MWG, NWG, WGS, NVEC, MGRP, LA, LB, LDAS, LDBS.
 * The defaults are a measured CPU set (AVX2, 2 cores); plugins/gemm/TUNING.md has the others.
 */
#include "convsolve.h"

/* {{{ tunables */
#ifndef TRANS_A
#define TRANS_A 0 /* 1: A is stored K x M and op(A) = A^T */
#endif
#ifndef TRANS_B
#define TRANS_B 0 /* 1: B is stored N x K and op(B) = B^T */
#endif
#ifndef WGD_M
#define WGD_M 1 /* work-items per work-group along M (local size, dimension 1) */
#endif
#ifndef WGD_N
#define WGD_N 1 /* work-items per work-group along N (local size, dimension 0) */
#endif
#ifndef TM
#define TM 6 /* rows of C per work-item (register tile height) */
#endif
#ifndef TN
#define TN 16 /* columns of C per work-item (register tile width), a multiple of VW */
#endif
#ifndef VW
#define VW 8 /* vector width along N (1, 2, 4, 8, 16): loads, FMAs and stores of B and C */
#endif
#ifndef VWM
#define VWM TM /* rows per contiguous row run; runs are WGD_M * VWM apart (USE_LOCAL: 1,2,4,8,16) */
#endif
#ifndef KU
#define KU 4 /* K unroll factor of the global-memory loop (USE_LOCAL == 0) */
#endif
#ifndef USE_LOCAL
#define USE_LOCAL 0 /* 1: stage KWG-deep tiles of op(A) and op(B) in local memory */
#endif
#ifndef MR
#define MR 16 /* row blocks per work-item, TM * WGD_M rows apart (> 1: k-blocked; USE_LOCAL: 1) */
#endif
#ifndef KB
#define KB 128 /* MR > 1: depth of the k-blocks whose op(B) block is packed in private memory */
#endif
#ifndef KWG
#define KWG 16 /* K depth of one local-memory tile (USE_LOCAL == 1) */
#endif
#ifndef DOUBLE_BUF
#define DOUBLE_BUF 1 /* USE_LOCAL: 1 = two local tiles, next tile prefetched into registers */
#endif
#ifndef LPAD
#define LPAD 0 /* USE_LOCAL: extra elements per local tile row, a multiple of VW and VWM */
#endif
/* }}} */

/* {{{ derived quantities and checks */
#define MWG (TM * WGD_M * MR)       /* rows of C per work-group */
#define NWG (TN * WGD_N)            /* columns of C per work-group */
#define WGS (WGD_M * WGD_N)         /* work-items per work-group */
#define NVEC (TN / VW)              /* vectors per register-tile row */
#define MGRP (TM / VWM)             /* row runs per work-item */
#define LA (MWG * KWG / WGS)        /* op(A) elements each work-item stages per tile */
#define LB (NWG * KWG / WGS)        /* op(B) elements each work-item stages per tile */
#define LDAS (MWG + LPAD)           /* row length (elements) of the local op(A) tile, k-major */
#define LDBS (NWG + LPAD)           /* row length (elements) of the local op(B) tile, k-major */

#if TN % VW != 0
#error "gemm.cl: TN must be a multiple of VW"
#endif
#if TM % VWM != 0
#error "gemm.cl: TM must be a multiple of VWM"
#endif
#if USE_LOCAL && MR != 1
#error "gemm.cl: USE_LOCAL needs MR == 1"
#endif
#if USE_LOCAL
#if (MWG * KWG) % WGS != 0 || (NWG * KWG) % WGS != 0
#error "gemm.cl: USE_LOCAL needs MWG * KWG and NWG * KWG to be multiples of WGD_M * WGD_N"
#endif
#if LPAD % VW != 0 || LPAD % VWM != 0
#error "gemm.cl: LPAD must be a multiple of VW and VWM"
#endif
#endif

#define GEMM_CAT_(a, b) a##b
#define GEMM_CAT(a, b) GEMM_CAT_(a, b)
#if CS_PRECISION == 16
#define GEMM_REAL half /* `real` is a typedef; vector type names are built from this */
#else
#define GEMM_REAL float
#endif
#if VW == 1
typedef real realN;
#define GEMM_VLOADN(p) (*(p))
#define GEMM_VSTOREN(v, p) (*(p) = (v))
#else
typedef GEMM_CAT(GEMM_REAL, VW) realN;
#define GEMM_VLOADN(p) GEMM_CAT(vload, VW)(0, p)
#define GEMM_VSTOREN(v, p) GEMM_CAT(vstore, VW)(v, 0, p)
#endif
#if USE_LOCAL
#if VWM == 1
typedef real realM;
#define GEMM_VSTOREM(v, p) (*(p) = (v))
#else
typedef GEMM_CAT(GEMM_REAL, VWM) realM;
#define GEMM_VSTOREM(v, p) GEMM_CAT(vstore, VWM)(v, 0, p)
#endif
#endif

/* Helpers must be inlined: the register tile is passed by pointer and has to stay in
 * registers (PoCL otherwise calls gemm_panel out of line and keeps acc in memory). */
#define GEMM_INLINE inline __attribute__((always_inline))

/* Row of C (relative to the work-group's first row) of register-tile row i. */
#define GEMM_ROW(i) ((((i) / VWM) * WGD_M + ly) * VWM + (i) % VWM)
/* Column of C (relative to the work-group's first column) of lane 0 of register vector j. */
#define GEMM_COL(j) (((j) * WGD_N + lx) * VW)

#if TRANS_A
#define GEMM_A(m, k) A[(k) * lda + (m)]
#else
#define GEMM_A(m, k) A[(m) * lda + (k)]
#endif
#if TRANS_B
#define GEMM_B(k, n) B[(n) * ldb + (k)]
#else
#define GEMM_B(k, n) B[(k) * ldb + (n)]
#endif
/* }}} */

/* {{{ helpers */

/* op(B)[k][n .. n + VW - 1] as a vector, every column in range (n + VW <= N). */
GEMM_INLINE realN gemm_load_b(const __global real *B, int ldb, int k, int n)
{
#if TRANS_B
    real t[VW];
#pragma unroll
    for (int l = 0; l < VW; ++l)
        t[l] = GEMM_B(k, n + l);
    return GEMM_VLOADN(t);
#else
    return GEMM_VLOADN(B + k * ldb + n);
#endif
}

/* Same, for a vector that may straddle N: columns past N - 1 read column N - 1 (not stored). */
GEMM_INLINE realN gemm_load_b_edge(const __global real *B, int ldb, int k, int n, int N)
{
    real t[VW];
#pragma unroll
    for (int l = 0; l < VW; ++l)
        t[l] = GEMM_B(k, min(n + l, N - 1));
    return GEMM_VLOADN(t);
}

/* Either of the above, as the columns require. */
GEMM_INLINE realN gemm_load_b_safe(const __global real *B, int ldb, int k, int n, int N)
{
    return n + VW <= N ? gemm_load_b(B, ldb, k, n) : gemm_load_b_edge(B, ldb, k, n, N);
}

/* C[m][n ..] = alpha * acc + beta * C[m][n ..] for the lanes with n + l < N. */
GEMM_INLINE void gemm_store(__global real *C, int ldc, int m, int n, int N, realN acc,
                       real alpha, real beta)
{
    __global real *c = C + m * ldc + n;
    if (n + VW <= N) {
        realN v = alpha * acc;
        if (beta != (real)0)
            v += beta * GEMM_VLOADN(c);
        GEMM_VSTOREN(v, c);
    } else {
        real t[VW];
        GEMM_VSTOREN(acc, t);
#pragma unroll
        for (int l = 0; l < VW; ++l) {
            if (n + l < N) {
                real v = alpha * t[l];
                if (beta != (real)0)
                    v += beta * c[l];
                c[l] = v;
            }
        }
    }
}

/* The register tile of the work-item whose first row block starts at m0, to C. */
GEMM_INLINE void gemm_store_tile(__global real *C, int ldc, int M, int N, int m0, int n0, int lx,
                                 int ly, realN acc[TM][NVEC], real alpha, real beta)
{
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int m = m0 + GEMM_ROW(i);
        if (m < M) {
#pragma unroll
            for (int j = 0; j < NVEC; ++j) {
                const int n = n0 + GEMM_COL(j);
                if (n < N)
                    gemm_store(C, ldc, m, n, N, acc[i][j], alpha, beta);
            }
        }
    }
}
/* }}} */

/* {{{ global-memory path step (USE_LOCAL == 0), a macro: written as an inlined function taking
 * acc by pointer, LLVM 15 hoists the broadcasts of the next k and spills the register tile. */

/* acc += op(A)[ROWS(i)][kk] * op(B)[kk][n_wg0 + GEMM_COL(j) ..]; LOAD_B(kk, j) gives vector j. */
#define GEMM_STEP(kk, ROWS, LOAD_B)                                                 \
    {                                                                               \
        realN b_[NVEC];                                                             \
        _Pragma("unroll") for (int j_ = 0; j_ < NVEC; ++j_)                         \
            b_[j_] = LOAD_B((kk), j_);                                              \
        _Pragma("unroll") for (int i_ = 0; i_ < TM; ++i_) {                         \
            const realN a_ = (realN)GEMM_A(ROWS(i_), (kk));                         \
            _Pragma("unroll") for (int j_ = 0; j_ < NVEC; ++j_)                     \
                acc[i_][j_] = fma(a_, b_[j_], acc[i_][j_]);                         \
        }                                                                           \
    }
#define GEMM_ROWS_FULL(i) (m0 + GEMM_ROW(i))
#define GEMM_ROWS_EDGE(i) (min(m0 + GEMM_ROW(i), M - 1)) /* rows past M read row M - 1 */
#define GEMM_LOAD_B_FULL(k, j) gemm_load_b(B, ldb, k, n_wg0 + GEMM_COL(j))
#define GEMM_LOAD_B_EDGE(k, j) gemm_load_b_safe(B, ldb, k, n_wg0 + GEMM_COL(j), N)
#define GEMM_LOAD_B_PACK(k, j) bpack[(k) - kb][j]

/* acc += op(A)[rows][K0 .. K1 - 1] * op(B)[K0 .. K1 - 1][columns], fast path when `full`. */
#define GEMM_PANEL(K0, K1)                                                          \
    if (full) {                                                                     \
        int k = (K0);                                                               \
        for (; k + KU <= (K1); k += KU) {                                           \
            _Pragma("unroll") for (int u = 0; u < KU; ++u)                          \
                GEMM_STEP(k + u, GEMM_ROWS_FULL, GEMM_LOAD_B_FULL)                  \
        }                                                                           \
        for (; k < (K1); ++k)                                                       \
            GEMM_STEP(k, GEMM_ROWS_FULL, GEMM_LOAD_B_FULL)                          \
    } else {                                                                        \
        for (int k = (K0); k < (K1); ++k)                                           \
            GEMM_STEP(k, GEMM_ROWS_EDGE, GEMM_LOAD_B_EDGE)                          \
    }
/* }}} */

#if USE_LOCAL
/* {{{ local-memory path steps (USE_LOCAL == 1) */

/* Element t of this work-item's share of a tile: its (k, m) in op(A) and (k, n) in op(B).
 * Consecutive work-items take consecutive addresses of the stored matrix (coalescing). */
#if TRANS_A
#define GEMM_A_IDX(t) const int mm = ((t) * WGS + lid) % MWG, kk = ((t) * WGS + lid) / MWG
#else
#define GEMM_A_IDX(t) const int kk = ((t) * WGS + lid) % KWG, mm = ((t) * WGS + lid) / KWG
#endif
#if TRANS_B
#define GEMM_B_IDX(t) const int kk = ((t) * WGS + lid) % KWG, nn = ((t) * WGS + lid) / KWG
#else
#define GEMM_B_IDX(t) const int nn = ((t) * WGS + lid) % NWG, kk = ((t) * WGS + lid) / NWG
#endif

/* This work-item's share of the tiles starting at k0, global -> registers; zeros outside. */
GEMM_INLINE void gemm_global_to_reg(const __global real *A, int lda, const __global real *B, int ldb,
                               int M, int N, int K, int m_wg0, int n_wg0, int k0, int lid,
                               bool full_mn, real ra[LA], real rb[LB])
{
    if (full_mn && k0 + KWG <= K) {
#pragma unroll
        for (int t = 0; t < LA; ++t) {
            GEMM_A_IDX(t);
            ra[t] = GEMM_A(m_wg0 + mm, k0 + kk);
        }
#pragma unroll
        for (int t = 0; t < LB; ++t) {
            GEMM_B_IDX(t);
            rb[t] = GEMM_B(k0 + kk, n_wg0 + nn);
        }
    } else {
#pragma unroll
        for (int t = 0; t < LA; ++t) {
            GEMM_A_IDX(t);
            ra[t] = (m_wg0 + mm < M && k0 + kk < K) ? GEMM_A(m_wg0 + mm, k0 + kk) : (real)0;
        }
#pragma unroll
        for (int t = 0; t < LB; ++t) {
            GEMM_B_IDX(t);
            rb[t] = (k0 + kk < K && n_wg0 + nn < N) ? GEMM_B(k0 + kk, n_wg0 + nn) : (real)0;
        }
    }
}

/* This work-item's share, registers -> local tiles as[k][m], bs[k][n]. */
GEMM_INLINE void gemm_reg_to_local(__local real *as, __local real *bs, int lid,
                              const real ra[LA], const real rb[LB])
{
#pragma unroll
    for (int t = 0; t < LA; ++t) {
        GEMM_A_IDX(t);
        as[kk * LDAS + mm] = ra[t];
    }
#pragma unroll
    for (int t = 0; t < LB; ++t) {
        GEMM_B_IDX(t);
        bs[kk * LDBS + nn] = rb[t];
    }
}

/* acc += the local tiles, KWG steps of k. */
GEMM_INLINE void gemm_compute(const __local realM *as, const __local realN *bs, int lx, int ly,
                         realN acc[TM][NVEC])
{
#pragma unroll
    for (int kk = 0; kk < KWG; ++kk) {
        real a[TM];
#pragma unroll
        for (int g = 0; g < MGRP; ++g)
            GEMM_VSTOREM(as[kk * (LDAS / VWM) + g * WGD_M + ly], a + g * VWM);
        realN b[NVEC];
#pragma unroll
        for (int j = 0; j < NVEC; ++j)
            b[j] = bs[kk * (LDBS / VW) + j * WGD_N + lx];
#pragma unroll
        for (int i = 0; i < TM; ++i) {
            const realN av = (realN)a[i];
#pragma unroll
            for (int j = 0; j < NVEC; ++j)
                acc[i][j] = fma(av, b[j], acc[i][j]);
        }
    }
}
/* }}} */
#endif

__kernel __attribute__((reqd_work_group_size(WGD_N, WGD_M, 1)))
void gemm(const int M, const int N, const int K, const real alpha, const real beta,
          const __global real *restrict A, const int offA, const int lda, const int strideA,
          const __global real *restrict B, const int offB, const int ldb, const int strideB,
          __global real *C, const int offC, const int ldc, const int strideC)
{
    const int lx = get_local_id(0);
    const int ly = get_local_id(1);
    const int n_wg0 = get_group_id(0) * NWG;
    const int m_wg0 = get_group_id(1) * MWG;
    const size_t bat = get_global_id(2);
    A += offA + bat * strideA;
    B += offB + bat * strideB;
    C += offC + bat * strideC;

    realN acc[TM][NVEC];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < NVEC; ++j)
            acc[i][j] = (realN)0;

#if !USE_LOCAL
    /* {{{ global-memory path: each work-item streams its own panels */
#define GEMM_INSIDE(m0) ((m0) + GEMM_ROW(0) < M && n_wg0 + GEMM_COL(0) < N)
#define GEMM_FULL(m0) ((m0) + GEMM_ROW(TM - 1) < M && n_wg0 + GEMM_COL(NVEC - 1) + VW <= N)
#if MR == 1
    const int m0 = m_wg0;
    if (!GEMM_INSIDE(m0))
        return; /* no element of this work-item's tile is in C */
    const bool full = GEMM_FULL(m0);
    GEMM_PANEL(0, K)
#else
    /* k-blocked: for each KB-deep block of k, op(B)'s block is packed into private memory
     * (contiguous: no cache-set aliasing whatever ldb is, and TRANS_B gathers only once), then
     * every row block r runs over it in turn, its register tile parked in stash[r] between */
    realN stash[MR][TM][NVEC];
    realN bpack[KB][NVEC];
    if (!GEMM_INSIDE(m_wg0))
        return; /* no element of this work-item's tiles is in C */
    for (int kb = 0; kb < K; kb += KB) {
        const int kend = min(kb + KB, K);
        for (int k = kb; k < kend; ++k)
#pragma unroll
            for (int j = 0; j < NVEC; ++j)
                bpack[k - kb][j] = GEMM_LOAD_B_EDGE(k, j);
        for (int r = 0; r < MR; ++r) {
            const int m0 = m_wg0 + r * (TM * WGD_M);
            if (m0 + GEMM_ROW(0) >= M)
                break; /* and so are the later row blocks */
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < NVEC; ++j)
                    acc[i][j] = kb == 0 ? (realN)0 : stash[r][i][j];
            if (m0 + GEMM_ROW(TM - 1) < M) {
                int k = kb;
                for (; k + KU <= kend; k += KU) {
#pragma unroll
                    for (int u = 0; u < KU; ++u)
                        GEMM_STEP(k + u, GEMM_ROWS_FULL, GEMM_LOAD_B_PACK)
                }
                for (; k < kend; ++k)
                    GEMM_STEP(k, GEMM_ROWS_FULL, GEMM_LOAD_B_PACK)
            } else {
                for (int k = kb; k < kend; ++k)
                    GEMM_STEP(k, GEMM_ROWS_EDGE, GEMM_LOAD_B_PACK)
            }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < NVEC; ++j)
                    stash[r][i][j] = acc[i][j];
        }
    }
    for (int r = 0; r < MR; ++r) {
        const int m0 = m_wg0 + r * (TM * WGD_M);
        if (!GEMM_INSIDE(m0))
            break;
        if (K > 0)
            gemm_store_tile(C, ldc, M, N, m0, n_wg0, lx, ly, stash[r], alpha, beta);
        else
            gemm_store_tile(C, ldc, M, N, m0, n_wg0, lx, ly, acc, alpha, beta);
    }
#endif
    /* }}} */
#else
    /* {{{ local-memory path: the work-group stages KWG-deep tiles, k-major */
    __local realM a_tiles[1 + DOUBLE_BUF][KWG * LDAS / VWM];
    __local realN b_tiles[1 + DOUBLE_BUF][KWG * LDBS / VW];
    const int m0 = m_wg0;
    const int lid = ly * WGD_N + lx;
    const bool full_mn = (m_wg0 + MWG <= M) && (n_wg0 + NWG <= N);
    real ra[LA], rb[LB];
    const int ntiles = CS_DIV_UP(K, KWG);

    gemm_global_to_reg(A, lda, B, ldb, M, N, K, m_wg0, n_wg0, 0, lid, full_mn, ra, rb);
    gemm_reg_to_local((__local real *)a_tiles[0], (__local real *)b_tiles[0], lid, ra, rb);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int t = 0; t < ntiles; ++t) {
#if DOUBLE_BUF
        /* buffer t & 1 is read while tile t + 1 travels global -> registers -> buffer
         * (t + 1) & 1, which nobody reads since the barrier that ended step t - 1 */
        const int cur = t & 1;
        if (t + 1 < ntiles)
            gemm_global_to_reg(A, lda, B, ldb, M, N, K, m_wg0, n_wg0, (t + 1) * KWG, lid,
                               full_mn, ra, rb);
        gemm_compute(a_tiles[cur], b_tiles[cur], lx, ly, acc);
        if (t + 1 < ntiles)
            gemm_reg_to_local((__local real *)a_tiles[cur ^ 1],
                              (__local real *)b_tiles[cur ^ 1], lid, ra, rb);
        barrier(CLK_LOCAL_MEM_FENCE);
#else
        if (t > 0) {
            barrier(CLK_LOCAL_MEM_FENCE);
            gemm_global_to_reg(A, lda, B, ldb, M, N, K, m_wg0, n_wg0, t * KWG, lid, full_mn,
                               ra, rb);
            gemm_reg_to_local((__local real *)a_tiles[0], (__local real *)b_tiles[0], lid,
                              ra, rb);
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        gemm_compute(a_tiles[0], b_tiles[0], lx, ly, acc);
#endif
    }
    /* }}} */
#endif

#if USE_LOCAL || MR == 1
    gemm_store_tile(C, ldc, M, N, m0, n_wg0, lx, ly, acc, alpha, beta);
#endif
}
