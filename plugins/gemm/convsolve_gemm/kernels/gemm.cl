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
 * NWG = TN * WGD_N * NR); each work-item holds a TM x TN register tile as TM x (TN / VW) vectors
 * of VW columns. In row block r < MR and column tile t < NR, work-item (lx, ly) owns
 *   rows    m_wg0 + r * TM * WGD_M + ((i / VWM) * WGD_M + ly) * VWM + i % VWM,   i < TM
 *   columns n_wg0 + t * TN * WGD_N + ((j * WGD_N) + lx) * VW + l,  j < TN / VW, l < VW
 * so VWM == TM and WGD_N == 1 give contiguous rows/columns (CPU), and VWM, VW < TM, TN give
 * the strided layout that keeps local-memory reads conflict-free (GPU).
 *
 * Three code paths:
 *   USE_LOCAL == 0, MR == 1: every work-item streams its rows of op(A) and columns of op(B)
 *      straight from global memory, the register tile as explicit vectors (CPU), for each of
 *      its NR column tiles in turn. TRANS_B == 1 makes every B vector a gather, and ldb * 4
 *      bytes a multiple of 4 KiB halves the speed (all of op(B)'s column panel falls in one
 *      L1 set).
 *   USE_LOCAL == 0, MR > 1 (the defaults): a work-item owns MR row blocks and, for each KB-deep
 *      k-block, packs its KB x TN blocks of op(B) into private memory (contiguous; TRANS_B
 *      transposed 8 x 8 in registers when VW == 8 and the compiler is clang; edge columns
 *      clamped) and runs the MR x NR tiles over it in turn, parking them in a private stash
 *      between k-blocks (the last k-block stores them to C);
 *      each row block runs its NR column tiles back to back, its rows of op(A) hot in L1.
 *      With TRANS_A the work-group's MWG rows of op(A) are packed the same way (rows of A^T
 *      are contiguous there, but lda apart per k), once for all NR column tiles.
 *      Each row block packs its share of the next k-block while its FMAs run (two buffers)
 *      and software-prefetches (PF) what comes later: op(B) two shares ahead, the next column
 *      tile's first block (PoCL runs work-groups in order along N) and its rows of C. An edge
 *      tile whose columns fit in its first TN / 2 runs a half-width micro-kernel.
 *   USE_LOCAL == 1 (GPU, needs MR == 1 and NR == 1): the work-group stages KWG-deep slices
 *      of op(A) and op(B) in local memory (k-major; transposition absorbed in the staging),
 *      optionally double-buffered with a register prefetch of the next slice.
 *
 * Defines read (tunables, each with a default below): TRANS_A, TRANS_B, WGD_M, WGD_N, TM, TN,
 * VW, VWM, KU, USE_LOCAL, MR, NR, KB, PF, KWG, DOUBLE_BUF, LPAD; from convsolve.h: CS_PRECISION.
 * Derived (defined here): MWG, NWG, NTW, WGS, NVEC, MGRP, LA, LB, LDAS, LDBS.
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
#ifndef NR
#define NR 1 /* column tiles of TN * WGD_N columns per work-group (MR > 1: op(A) shared by them) */
#endif
#ifndef KB
#define KB 128 /* MR > 1: depth of the k-blocks whose op(B) block is packed in private memory */
#endif
#ifndef PF
#define PF 1 /* MR > 1: 1 = software-prefetch op(B)'s next k-block, the next tile's, and C */
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
#define NTW (TN * WGD_N)            /* columns of C per column tile */
#define NWG (NTW * NR)              /* columns of C per work-group */
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
#if USE_LOCAL && NR != 1
#error "gemm.cl: USE_LOCAL needs NR == 1"
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

#if !USE_LOCAL && MR > 1
/* Software prefetch of the cache line holding *p. OpenCL's prefetch() is a no-op on PoCL;
 * clang's builtin emits prefetcht0 (other compilers: no prefetch). */
#if PF && defined(__clang__)
#define GEMM_PREFETCH(p) __builtin_prefetch(p)
#else
#define GEMM_PREFETCH(p)
#endif
#define GEMM_LINE (64 / (int)sizeof(real)) /* elements per 64-byte cache line */

/* Prefetch p[r * ld + c] for r0 <= r < r1, c0 <= c < c1 (c0 < c1), one touch per cache line. */
GEMM_INLINE void gemm_prefetch(const __global real *p, int ld, int r0, int r1, int c0, int c1)
{
    for (int r = r0; r < r1; ++r) {
        for (int c = c0; c < c1; c += GEMM_LINE)
            GEMM_PREFETCH(p + r * ld + c);
        GEMM_PREFETCH(p + r * ld + c1 - 1);
    }
}

/* Prefetch op(B)[k0 .. k1 - 1][n0 .. n1 - 1], n0 < n1. */
#if TRANS_B
#define GEMM_PREFETCH_B(k0, k1, n0, n1) gemm_prefetch(B, ldb, n0, n1, k0, k1)
#else
#define GEMM_PREFETCH_B(k0, k1, n0, n1) gemm_prefetch(B, ldb, k0, k1, n0, n1)
#endif

#if TRANS_B && VW == 8 && defined(__clang__)
#define GEMM_TRANSPOSE8 1
/* r[l][t] -> r[t][l] for an 8 x 8 block (unpack, 64-bit shuffle, 128-bit lane swap) */
GEMM_INLINE void gemm_transpose8(realN r[8])
{
    realN t[8], u[8];
#pragma unroll
    for (int i = 0; i < 8; i += 2) {
        t[i] = __builtin_shufflevector(r[i], r[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
        t[i + 1] = __builtin_shufflevector(r[i], r[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
    }
#pragma unroll
    for (int i = 0; i < 8; i += 4) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            u[i + 2 * h] =
                __builtin_shufflevector(t[i + h], t[i + h + 2], 0, 1, 8, 9, 4, 5, 12, 13);
            u[i + 2 * h + 1] =
                __builtin_shufflevector(t[i + h], t[i + h + 2], 2, 3, 10, 11, 6, 7, 14, 15);
        }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        r[i] = __builtin_shufflevector(u[i], u[i + 4], 0, 1, 2, 3, 8, 9, 10, 11);
        r[i + 4] = __builtin_shufflevector(u[i], u[i + 4], 4, 5, 6, 7, 12, 13, 14, 15);
    }
}
#endif

/* op(B)[k0 .. k1 - 1][the work-item's first nv vectors] -> bp[k - kb]: contiguous rows,
 * columns past N clamped to N - 1. */
GEMM_INLINE void gemm_pack_b(realN bp[KB][NVEC], const __global real *B, int ldb, int N,
                             int n_wg0, int lx, int nv, int kb, int k0, int k1)
{
    int k = k0;
#ifdef GEMM_TRANSPOSE8
    /* 8 x 8 blocks: 8 contiguous vectors along k (rows of B), transposed in registers */
    for (; k + 8 <= k1; k += 8) {
#pragma unroll
        for (int j = 0; j < NVEC; ++j) {
            if (j < nv) {
                const int n = n_wg0 + GEMM_COL(j);
                realN r[8];
#pragma unroll
                for (int l = 0; l < 8; ++l)
                    r[l] = GEMM_VLOADN(B + min(n + l, N - 1) * ldb + k);
                gemm_transpose8(r);
#pragma unroll
                for (int l = 0; l < 8; ++l)
                    bp[k + l - kb][j] = r[l];
            }
        }
    }
#endif
    for (; k < k1; ++k)
#pragma unroll
        for (int j = 0; j < NVEC; ++j)
            if (j < nv)
                bp[k - kb][j] = gemm_load_b_safe(B, ldb, k, n_wg0 + GEMM_COL(j), N);
}

#if TRANS_A
/* op(A)[the work-group's MWG rows][k0 .. k1 - 1] -> ap[k - kb][row] with op(A) = A^T: row k of
 * A holds them contiguously; rows past M clamped to M - 1. */
GEMM_INLINE void gemm_pack_at(real ap[KB][MWG], const __global real *A, int lda, int M,
                              int m_wg0, int kb, int k0, int k1)
{
    for (int k = k0; k < k1; ++k) {
#pragma unroll
        for (int c = 0; c < MWG; c += VW) {
            if (MWG % VW == 0 && m_wg0 + c + VW <= M) { /* then ap's vectors are aligned */
                *(realN *)&ap[k - kb][c] = GEMM_VLOADN(&GEMM_A(m_wg0 + c, k));
            } else {
                for (int l = c; l < min(c + VW, MWG); ++l)
                    ap[k - kb][l] = GEMM_A(min(m_wg0 + l, M - 1), k);
            }
        }
    }
}
#endif
#endif

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

/* acc += op(A)[rows][kk] * op(B)[kk][columns] for the first NV vectors of each row; LOAD_A(i, kk)
 * gives op(A)'s element of register-tile row i, LOAD_B(kk, j) the vector j of op(B)'s row kk. */
#define GEMM_STEP(kk, LOAD_A, LOAD_B, NV)                                           \
    {                                                                               \
        realN b_[NVEC];                                                             \
        _Pragma("unroll") for (int j_ = 0; j_ < (NV); ++j_)                         \
            b_[j_] = LOAD_B((kk), j_);                                              \
        _Pragma("unroll") for (int i_ = 0; i_ < TM; ++i_) {                         \
            const realN a_ = (realN)LOAD_A(i_, (kk));                               \
            _Pragma("unroll") for (int j_ = 0; j_ < (NV); ++j_)                     \
                acc[i_][j_] = fma(a_, b_[j_], acc[i_][j_]);                         \
        }                                                                           \
    }
#define GEMM_LOAD_A_FULL(i, k) GEMM_A(m0 + GEMM_ROW(i), k)
#define GEMM_LOAD_A_EDGE(i, k) GEMM_A(min(m0 + GEMM_ROW(i), M - 1), k) /* rows past M: row M - 1 */
#if TRANS_A /* MR > 1: op(A)'s k-block is packed (see gemm_pack_at), else read in place */
#define GEMM_LOAD_A_BLOCK(i, k) apack[cur][(k) - kb][m0 - m_wg0 + GEMM_ROW(i)]
#else
#define GEMM_LOAD_A_BLOCK(i, k) arow[i][k]
#endif
#define GEMM_LOAD_B_FULL(k, j) gemm_load_b(B, ldb, k, n0 + GEMM_COL(j))
#define GEMM_LOAD_B_EDGE(k, j) gemm_load_b_safe(B, ldb, k, n0 + GEMM_COL(j), N)
#define GEMM_LOAD_B_PACK(k, j) bpack[cur][t][(k) - kb][j]

/* acc += op(A)[rows][K0 .. K1 - 1] * op(B)[K0 .. K1 - 1][columns], fast path when `full`. */
#define GEMM_PANEL(K0, K1)                                                          \
    if (full) {                                                                     \
        int k = (K0);                                                               \
        for (; k + KU <= (K1); k += KU) {                                           \
            _Pragma("unroll") for (int u = 0; u < KU; ++u)                          \
                GEMM_STEP(k + u, GEMM_LOAD_A_FULL, GEMM_LOAD_B_FULL, NVEC)          \
        }                                                                           \
        for (; k < (K1); ++k)                                                       \
            GEMM_STEP(k, GEMM_LOAD_A_FULL, GEMM_LOAD_B_FULL, NVEC)                  \
    } else {                                                                        \
        for (int k = (K0); k < (K1); ++k)                                           \
            GEMM_STEP(k, GEMM_LOAD_A_EDGE, GEMM_LOAD_B_EDGE, NVEC)                  \
    }

/* MR > 1: acc += op(A)[rows][kb .. kend - 1] * the packed op(B) block, NV vectors per row. */
#define GEMM_BLOCK(NV)                                                              \
    {                                                                               \
        int k = kb;                                                                 \
        for (; k + KU <= kend; k += KU) {                                           \
            _Pragma("unroll") for (int u = 0; u < KU; ++u)                          \
                GEMM_STEP(k + u, GEMM_LOAD_A_BLOCK, GEMM_LOAD_B_PACK, NV)           \
        }                                                                           \
        for (; k < kend; ++k)                                                       \
            GEMM_STEP(k, GEMM_LOAD_A_BLOCK, GEMM_LOAD_B_PACK, NV)                   \
    }
#define GEMM_HALF (NVEC > 1 ? NVEC / 2 : NVEC) /* vectors of a half-width register tile */
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
#if MR == 1
    const int m0 = m_wg0;
    if (!GEMM_INSIDE(m0))
        return; /* no element of this work-item's tiles is in C */
    for (int t = 0; t < NR; ++t) { /* its NR column tiles in turn */
        const int n0 = n_wg0 + t * NTW;
        if (n0 + GEMM_COL(0) >= N)
            break;
        const bool full = m0 + GEMM_ROW(TM - 1) < M && n0 + GEMM_COL(NVEC - 1) + VW <= N;
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < NVEC; ++j)
                acc[i][j] = (realN)0;
        GEMM_PANEL(0, K)
        gemm_store_tile(C, ldc, M, N, m0, n0, lx, ly, acc, alpha, beta);
    }
#else
    /* k-blocked: for each KB-deep block of k, op(B)'s block is packed into private memory
     * (contiguous: no cache-set aliasing whatever ldb is, and TRANS_B transposed only once), then
     * every row block r runs over it in turn, its register tile parked in stash[r] between */
    realN stash[MR][NR][TM][NVEC];
    realN bpack[2][NR][KB][NVEC]; /* the k-block being used, and the next one being packed */
#if TRANS_A
    real apack[2][KB][MWG] __attribute__((aligned(sizeof(realN)))); /* the same for op(A) = A^T */
#endif
    if (!GEMM_INSIDE(m_wg0))
        return; /* no element of this work-item's tiles is in C */
    /* row blocks with rows in C; each packs `share` rows of the next k-block while it runs */
    const int live = min(MR, CS_DIV_UP(M - m_wg0 - GEMM_ROW(0), TM * WGD_M));
    /* column tiles with columns in C (a constant 1 when NR == 1, so the tile loops fold) */
    const int tiles = NR == 1 ? 1 : min(NR, CS_DIV_UP(N - n_wg0 - GEMM_COL(0), NTW));
    const int share = CS_DIV_UP(CS_DIV_UP(KB, live), 8) * 8; /* (whole 8 x 8 blocks, TRANS_B) */
    const int pf_n0 = n_wg0 + GEMM_COL(0);
    const int pf_n1 = min(n_wg0 + (tiles - 1) * NTW + GEMM_COL(NVEC - 1) + VW, N);
    /* an edge tile whose columns all lie in its first half runs the half-width micro-kernel */
#define GEMM_NARROW(t) (NVEC > 1 && n_wg0 + (t) * NTW + GEMM_COL(GEMM_HALF) >= N)
#define GEMM_NV(t) (GEMM_NARROW(t) ? GEMM_HALF : NVEC) /* vectors of op(B) to pack */
    for (int t = 0; t < tiles; ++t)
        gemm_pack_b(bpack[0][t], B, ldb, N, n_wg0 + t * NTW, lx, GEMM_NV(t), 0, 0, min(KB, K));
#if TRANS_A
    gemm_pack_at(apack[0], A, lda, M, m_wg0, 0, 0, min(KB, K));
#endif
    for (int kb = 0, cur = 0; kb < K; kb += KB, cur ^= 1) {
        const int kend = min(kb + KB, K), knext = min(kend + KB, K);
        for (int r = 0; r < live; ++r) {
            const int m0 = m_wg0 + r * (TM * WGD_M);
            /* op(B) rows are ldb apart, often a page each: prefetch two shares ahead, and
             * pack this row block's share of the next k-block while the FMAs run */
            const int pf0 = min(kend + (r + 2) * share, K), pf1 = min(kend + (r + 3) * share, K);
            if (pf0 < pf1)
                GEMM_PREFETCH_B(pf0, pf1, pf_n0, pf_n1);
            if (kend == K) {
                /* last k-block: PoCL runs the next column tile next, so prefetch its first
                 * k-block; and this row block's rows of C, stored when its FMAs are done */
                const int nk0 = min(r * share, KB), nk1 = min((r + 1) * share, min(KB, K));
                if (nk0 < nk1 && pf_n0 + NWG < N)
                    GEMM_PREFETCH_B(nk0, nk1, pf_n0 + NWG, min(pf_n1 + NWG, N));
                for (int i = 0; i < TM; ++i)
                    for (int t = 0; t < tiles; ++t)
                        GEMM_PREFETCH(C + min(m0 + GEMM_ROW(i), M - 1) * ldc + pf_n0 + t * NTW);
            }
            const int k0 = min(kend + r * share, knext), k1 = min(kend + (r + 1) * share, knext);
            for (int t = 0; t < tiles; ++t)
                gemm_pack_b(bpack[cur ^ 1][t], B, ldb, N, n_wg0 + t * NTW, lx, GEMM_NV(t), kend,
                            k0, k1);
#if TRANS_A
            gemm_pack_at(apack[cur ^ 1], A, lda, M, m_wg0, kend, k0, k1);
#else
            const __global real *arow[TM]; /* op(A)'s rows; rows past M read row M - 1 */
#pragma unroll
            for (int i = 0; i < TM; ++i)
                arow[i] = A + min(m0 + GEMM_ROW(i), M - 1) * lda;
#endif
            /* the NR column tiles in turn, over the same rows of op(A) (now in L1) */
            for (int t = 0; t < tiles; ++t) {
#pragma unroll
                for (int i = 0; i < TM; ++i)
#pragma unroll
                    for (int j = 0; j < NVEC; ++j)
                        acc[i][j] = kb == 0 ? (realN)0 : stash[r][t][i][j];
                if (GEMM_NARROW(t))
                    GEMM_BLOCK(GEMM_HALF)
                else
                    GEMM_BLOCK(NVEC)
                if (kend == K) {
                    gemm_store_tile(C, ldc, M, N, m0, n_wg0 + t * NTW, lx, ly, acc, alpha, beta);
                } else {
#pragma unroll
                    for (int i = 0; i < TM; ++i)
#pragma unroll
                        for (int j = 0; j < NVEC; ++j)
                            stash[r][t][i][j] = acc[i][j];
                }
            }
        }
    }
    if (K == 0) /* then the loop above stored nothing */
        for (int r = 0; r < live; ++r)
            for (int t = 0; t < tiles; ++t)
                gemm_store_tile(C, ldc, M, N, m_wg0 + r * (TM * WGD_M), n_wg0 + t * NTW, lx, ly,
                                acc, alpha, beta);
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

#if USE_LOCAL
    gemm_store_tile(C, ldc, M, N, m0, n_wg0, lx, ly, acc, alpha, beta);
#endif
}
