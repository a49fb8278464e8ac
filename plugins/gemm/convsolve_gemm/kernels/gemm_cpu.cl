/* gemm_cpu.cl: the kernel gemm for USE_LOCAL == 0 (CPUs), register tiles fed from global memory.
 *
 * Included by gemm.cl, whose banner gives the kernel's signature, layouts, launch geometry and
 * work decomposition; it defines the kernel here so that its body is this path's code. No local
 * memory and no barriers: each work-item reads op(A) and op(B) from global memory into
 * a TM x TN register tile held as TM x NVEC explicit vectors of VW columns (rows and columns as
 * GEMM_ROW and GEMM_COL in gemm_common.cl say). The k step is the GEMM_STEP macro: each k
 * broadcasts TM elements of op(A) against NVEC vectors of op(B).
 *   MR == 1: every work-item streams its rows of op(A) and columns of op(B) straight from global
 *      memory, for each of its NR column tiles in turn. TRANS_B == 1 makes every B vector a
 *      gather, and ldb * 4 bytes a multiple of 4 KiB halves the speed (all of op(B)'s column
 *      panel falls in one L1 set).
 *   MR > 1 (the defaults): a work-item owns MR row blocks and, for each KB-deep k-block, packs
 *      its KB x TN blocks of op(B) into private memory, bpack[2][NR][KB][NVEC] (contiguous;
 *      TRANS_B transposed in 8 x 8 blocks in registers when VW is 8 or 16 and the compiler is
 *      clang; edge columns clamped) and runs the MR x NR tiles over it in turn, parking them in
 *      a private stash between k-blocks (the last k-block stores them to C); each row block runs
 *      its NR column tiles back to back, its rows of op(A) hot in L1. With TRANS_A the
 *      work-group's MWG rows of op(A) are packed the same way, apack[2][KB][MWG] (rows of A^T
 *      are contiguous there, but lda apart per k), once for all NR column tiles. Each row block
 *      packs its share of the next k-block while its FMAs run (two buffers) and
 *      software-prefetches (PF) what comes later: op(B) two shares ahead, the next column
 *      tile's first block (PoCL runs work-groups in order along N) and its rows of C. An edge
 *      tile whose columns fit in its first TN / 2 runs a half-width micro-kernel.
 * Private memory per work-item (MR > 1): stash MR * NR * TM * TN, op(B) 2 * NR * KB * TN, and
 * with TRANS_A op(A) 2 * KB * MWG elements.
 *
 * Defines read: TRANS_A, TRANS_B, COL_IMAGES (MR > 1), WGD_M, WGD_N, TM, TN, VW, VWM, KU, MR,
 * NR, KB, PF (tunables, defaults in gemm_common.cl).
 */
#include "gemm_common.cl"

/* {{{ loads of op(B) */

/* op(B)[k][n .. n + VW - 1] as a vector, every column in range (n + VW <= N). */
GEMM_INLINE realN gemm_load_b(const __global real *B, int ldb, int k, int n)
{
#if TRANS_B
    real t[VW];
#pragma unroll
    for (int l = 0; l < VW; ++l)
        t[l] = GEMM_B(B, ldb, k, n + l);
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
        t[l] = GEMM_B(B, ldb, k, min(n + l, N - 1));
    return GEMM_VLOADN(t);
}

/* Either of the above, as the columns require. */
GEMM_INLINE realN gemm_load_b_safe(const __global real *B, int ldb, int k, int n, int N)
{
    return n + VW <= N ? gemm_load_b(B, ldb, k, n) : gemm_load_b_edge(B, ldb, k, n, N);
}
/* }}} */

/* {{{ the k steps of a register tile: macros, because written as an inlined function taking acc
 * by pointer, LLVM 15 hoists the broadcasts of the next k and spills the register tile. */

/* One k step of the register tile acc, its first nv vectors per row:
 *   acc[i][j] += a_i * b_j   for i < TM, j < nv,
 * a_i being op(A)'s element of register-tile row i and b_j the vector j of op(B)'s row, each an
 * expression in the index name passed as i or j. */
#define GEMM_STEP(acc, nv, i, a_i, j, b_j)                                          \
    {                                                                               \
        realN b_[NVEC];                                                             \
        _Pragma("unroll") for (int j = 0; j < (nv); ++j)                            \
            b_[j] = (b_j);                                                          \
        _Pragma("unroll") for (int i = 0; i < TM; ++i) {                            \
            const realN a_ = (realN)(a_i);                                          \
            _Pragma("unroll") for (int j = 0; j < (nv); ++j)                        \
                (acc)[i][j] = fma(a_, b_[j], (acc)[i][j]);                          \
        }                                                                           \
    }

/* GEMM_STEP for k = k0 .. k1 - 1, KU steps unrolled; a_i and b_j read k by the name passed as k. */
#define GEMM_STEPS(acc, nv, k, k0, k1, i, a_i, j, b_j)                              \
    {                                                                               \
        int k_ = (k0);                                                              \
        for (; k_ + KU <= (k1); k_ += KU) {                                         \
            _Pragma("unroll") for (int u_ = 0; u_ < KU; ++u_) {                     \
                const int k = k_ + u_;                                              \
                GEMM_STEP(acc, nv, i, a_i, j, b_j)                                  \
            }                                                                       \
        }                                                                           \
        for (; k_ < (k1); ++k_) {                                                   \
            const int k = k_;                                                       \
            GEMM_STEP(acc, nv, i, a_i, j, b_j)                                      \
        }                                                                           \
    }
/* }}} */

/* Whether the work-item (lx, ly) whose first row block starts at row m0 and first column tile at
 * column n0 has any element in C. (This and GEMM_NARROW are macros: as inlined functions
 * returning bool they changed the code PoCL generates.) */
#define GEMM_INSIDE(m0, n0, M, N, lx, ly)                                           \
    ((m0) + GEMM_ROW(0, ly) < (M) && (n0) + GEMM_COL(0, lx) < (N))

#if MR > 1
/* {{{ MR > 1: k-blocked, op(B) (and with TRANS_A op(A)) packed in private memory */

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
GEMM_INLINE void gemm_prefetch_b(const __global real *B, int ldb, int k0, int k1, int n0, int n1)
{
#if TRANS_B
    gemm_prefetch(B, ldb, n0, n1, k0, k1);
#else
    gemm_prefetch(B, ldb, k0, k1, n0, n1);
#endif
}

#if TRANS_B && (VW == 8 || VW == 16) && defined(__clang__)
#define GEMM_TRANSPOSE8 1
/* r[l] = op(B)[k + l][n .. n + 7]: rows n .. n + 7 of B (clamped to N - 1) from k, loaded as
 * 8 vectors and transposed 8 x 8 in registers (unpack, 64-bit shuffle, 128-bit lane swap) */
GEMM_INLINE void gemm_load_transposed8(real8 r[8], const __global real *B, int ldb, int n, int N,
                                       int k)
{
    real8 t[8], u[8];
#pragma unroll
    for (int l = 0; l < 8; ++l)
        r[l] = vload8(0, B + min(n + l, N - 1) * ldb + k);
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

/* op(B)[k0 .. k1 - 1][the first nv vectors of work-item column lx of the column tile starting
 * at n0] -> bp[k - kb]: contiguous rows, columns past N clamped to N - 1.  With COL_IMAGES each
 * vector's place (GEMM_COL_AT) is found once: one load a k where its columns lie in one image,
 * two and a select where they lie in two. */
GEMM_INLINE void gemm_pack_b(realN bp[KB][NVEC], const __global real *B, int ldb, int strideB,
                             int N, int n0, int lx, int nv, int kb, int k0, int k1)
{
    int k = k0;
#if COL_IMAGES
    /* a vector across images: where images hold VW columns or more, lanes < cut from one load
     * at at[j] and the rest from one at next[j] (each load runs on past its image's row into
     * rows the select drops, inside B); else each lane from its own image (lane) */
    int at[NVEC], next[NVEC], cut[NVEC], lane[NVEC][VW];
#pragma unroll
    for (int j = 0; j < NVEC; ++j) {
        const int n = n0 + GEMM_COL(j, lx);
        at[j] = GEMM_COL_AT(min(n, N - 1), ldb, strideB);
        cut[j] = GEMM_WHOLE(n, N, ldb) ? VW : ldb >= VW && n + VW <= N ? ldb - n % ldb : 0;
        next[j] = (n / ldb + 1) * strideB - cut[j];
        for (int l = 0; l < VW && !cut[j]; ++l)
            lane[j][l] = GEMM_COL_AT(min(n + l, N - 1), ldb, strideB);
    }
    for (; k < k1; ++k)
#pragma unroll
        for (int j = 0; j < NVEC; ++j) {
            if (j < nv && cut[j] == VW) {
                bp[k - kb][j] = GEMM_VLOADN(B + k * ldb + at[j]);
            } else if (j < nv && cut[j]) {
                bp[k - kb][j] = select(GEMM_VLOADN(B + k * ldb + next[j]),
                                       GEMM_VLOADN(B + k * ldb + at[j]),
                                       GEMM_LANES < (GEMM_MASKN)cut[j]);
            } else if (j < nv) {
                real t[VW];
#pragma unroll
                for (int l = 0; l < VW; ++l)
                    t[l] = B[k * ldb + lane[j][l]];
                bp[k - kb][j] = GEMM_VLOADN(t);
            }
        }
#endif
#ifdef GEMM_TRANSPOSE8
    /* 8 x 8 blocks: 8 contiguous vectors along k (rows of B), transposed in registers; with
     * VW == 16 two blocks, columns n .. n + 7 and n + 8 .. n + 15, joined per k */
    for (; k + 8 <= k1; k += 8) {
#pragma unroll
        for (int j = 0; j < NVEC; ++j) {
            if (j < nv) {
                const int n = n0 + GEMM_COL(j, lx);
                real8 r[8];
                gemm_load_transposed8(r, B, ldb, n, N, k);
#if VW == 16
                real8 h[8];
                gemm_load_transposed8(h, B, ldb, n + 8, N, k);
#pragma unroll
                for (int l = 0; l < 8; ++l)
                    bp[k + l - kb][j] = __builtin_shufflevector(r[l], h[l], 0, 1, 2, 3, 4, 5, 6,
                                                                7, 8, 9, 10, 11, 12, 13, 14, 15);
#else
#pragma unroll
                for (int l = 0; l < 8; ++l)
                    bp[k + l - kb][j] = r[l];
#endif
            }
        }
    }
#endif
    for (; k < k1; ++k)
#pragma unroll
        for (int j = 0; j < NVEC; ++j)
            if (j < nv)
                bp[k - kb][j] = gemm_load_b_safe(B, ldb, k, n0 + GEMM_COL(j, lx), N);
}

#if TRANS_A
/* op(A)[the work-group's MWG rows from m_wg0][k0 .. k1 - 1] -> ap[k - kb][row] with
 * op(A) = A^T: row k of A holds them contiguously; rows past M clamped to M - 1. */
GEMM_INLINE void gemm_pack_at(real ap[KB][MWG], const __global real *A, int lda, int M,
                              int m_wg0, int kb, int k0, int k1)
{
    for (int k = k0; k < k1; ++k) {
#pragma unroll
        for (int c = 0; c < MWG; c += VW) {
            if (MWG % VW == 0 && m_wg0 + c + VW <= M) { /* then ap's vectors are aligned */
                *(realN *)&ap[k - kb][c] = GEMM_VLOADN(&GEMM_A(A, lda, m_wg0 + c, k));
            } else {
                for (int l = c; l < min(c + VW, MWG); ++l)
                    ap[k - kb][l] = GEMM_A(A, lda, min(m_wg0 + l, M - 1), k);
            }
        }
    }
}
#endif

#define GEMM_HALF (NVEC > 1 ? NVEC / 2 : NVEC) /* vectors of a half-width register tile */

/* Whether the column tile starting at column n0 is an edge tile whose columns (of work-item
 * column lx) all lie in its first half: it runs the half-width micro-kernel. */
#define GEMM_NARROW(n0, N, lx) (NVEC > 1 && (n0) + GEMM_COL(GEMM_HALF, lx) >= (N))

/* GEMM_STEPS with the half-width micro-kernel (GEMM_HALF vectors per row) when `narrow`, else
 * with the full one (NVEC). */
#define GEMM_STEPS_NARROW(narrow, acc, ...)                                         \
    if (narrow)                                                                     \
        GEMM_STEPS(acc, GEMM_HALF, __VA_ARGS__)                                     \
    else                                                                            \
        GEMM_STEPS(acc, NVEC, __VA_ARGS__)

/* }}} */
#endif

__kernel __attribute__((reqd_work_group_size(WGD_N, WGD_M, 1)))
void gemm(GEMM_PARAMS)
{
    const int lx = get_local_id(0);
    const int ly = get_local_id(1);
    const int n_wg0 = get_group_id(0) * NWG;
    const int m_wg0 = get_group_id(1) * MWG;
    const size_t bat = get_global_id(2);
    A += offA + bat * strideA;
    B += offB + bat * strideB;
    GEMM_EPI_INIT;
    C += offC + bat * strideC;

    realN acc[TM][NVEC];
    GEMM_ZERO(acc);
#if MR == 1
    /* {{{ streaming: the NR column tiles in turn, op(A) and op(B) read in place */
    const int m0 = m_wg0;
    if (!GEMM_INSIDE(m0, n_wg0, M, N, lx, ly))
        return; /* no element of this work-item's tiles is in C */
    for (int t = 0; t < NR; ++t) {
        const int n0 = n_wg0 + t * NTW;
        if (n0 + GEMM_COL(0, lx) >= N)
            break;
        const bool full = m0 + GEMM_ROW(TM - 1, ly) < M && n0 + GEMM_COL(NVEC - 1, lx) + VW <= N;
        GEMM_ZERO(acc);
        if (full)
            GEMM_STEPS(acc, NVEC, k, 0, K, i, GEMM_A(A, lda, m0 + GEMM_ROW(i, ly), k),
                       j, gemm_load_b(B, ldb, k, n0 + GEMM_COL(j, lx)))
        else /* rows past M read row M - 1, columns past N column N - 1 (neither is stored) */
            for (int k = 0; k < K; ++k)
                GEMM_STEP(acc, NVEC, i, GEMM_A(A, lda, min(m0 + GEMM_ROW(i, ly), M - 1), k),
                          j, gemm_load_b_safe(B, ldb, k, n0 + GEMM_COL(j, lx), N))
        gemm_store_tile(C, ldc, strideC, M, N, m0, n0, lx, ly, acc, alpha, beta GEMM_EPI_ARG);
    }
    /* }}} */
#else
    /* {{{ k-blocked: for each KB-deep block of k, op(B)'s block is packed into private memory
     * (contiguous: no cache-set aliasing whatever ldb is, and TRANS_B transposed only once),
     * then every row block r runs over it in turn, its register tiles parked in stash[r] between
     * k-blocks */
    realN stash[MR][NR][TM][NVEC];
    realN bpack[2][NR][KB][NVEC]; /* the k-block being used, and the next one being packed */
#if TRANS_A
    real apack[2][KB][MWG] __attribute__((aligned(sizeof(realN)))); /* the same for op(A) = A^T */
#endif
    if (!GEMM_INSIDE(m_wg0, n_wg0, M, N, lx, ly))
        return; /* no element of this work-item's tiles is in C */
    /* row blocks with rows in C; each packs `share` rows of the next k-block while it runs */
    const int live = min(MR, CS_DIV_UP(M - m_wg0 - GEMM_ROW(0, ly), TM * WGD_M));
    /* column tiles with columns in C (a constant 1 when NR == 1, so the tile loops fold) */
    const int tiles = NR == 1 ? 1 : min(NR, CS_DIV_UP(N - n_wg0 - GEMM_COL(0, lx), NTW));
    const int share = CS_DIV_UP(CS_DIV_UP(KB, live), 8) * 8; /* (whole 8 x 8 blocks, TRANS_B) */
    const int pf_n0 = n_wg0 + GEMM_COL(0, lx);
    const int pf_n1 = min(n_wg0 + (tiles - 1) * NTW + GEMM_COL(NVEC - 1, lx) + VW, N);
    /* where those columns' prefetches start in B (COL_IMAGES: in their first one's image, the
     * span running on into the next images' rows), and the next column tile's */
    const int pf_b0 = GEMM_COL_AT(pf_n0, ldb, strideB);
    const int pf_next = GEMM_COL_AT(min(pf_n0 + NWG, N - 1), ldb, strideB);
    for (int t = 0; t < tiles; ++t)
        gemm_pack_b(bpack[0][t], B, ldb, strideB, N, n_wg0 + t * NTW, lx,
                    GEMM_NARROW(n_wg0 + t * NTW, N, lx) ? GEMM_HALF : NVEC, 0, 0, min(KB, K));
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
                gemm_prefetch_b(B, ldb, pf0, pf1, pf_b0, pf_b0 + pf_n1 - pf_n0);
            if (kend == K) {
                /* last k-block: PoCL runs the next column tile next, so prefetch its first
                 * k-block; and this row block's rows of C, stored when its FMAs are done */
                const int nk0 = min(r * share, KB), nk1 = min((r + 1) * share, min(KB, K));
                if (nk0 < nk1 && pf_n0 + NWG < N)
                    gemm_prefetch_b(B, ldb, nk0, nk1, pf_next,
                                    pf_next + min(pf_n1 + NWG, N) - pf_n0 - NWG);
                for (int i = 0; i < TM; ++i)
                    for (int t = 0; t < tiles; ++t) {
                        const int at = min(m0 + GEMM_ROW(i, ly), M - 1) * ldc +
                                       GEMM_COL_AT(pf_n0 + t * NTW, ldc, strideC);
                        GEMM_PREFETCH(C + at);
#if CS_EPI_RESIDUAL /* the epilogue's z, read with C: its whole row of the tile */
                        for (int l = 0; l < NVEC * VW; l += GEMM_LINE)
                            GEMM_PREFETCH(epi.z + at + l);
#endif
                    }
            }
            const int k0 = min(kend + r * share, knext), k1 = min(kend + (r + 1) * share, knext);
            for (int t = 0; t < tiles; ++t)
                gemm_pack_b(bpack[cur ^ 1][t], B, ldb, strideB, N, n_wg0 + t * NTW, lx,
                            GEMM_NARROW(n_wg0 + t * NTW, N, lx) ? GEMM_HALF : NVEC, kend, k0, k1);
#if TRANS_A
            gemm_pack_at(apack[cur ^ 1], A, lda, M, m_wg0, kend, k0, k1);
#else
            const __global real *arow[TM]; /* op(A)'s rows; rows past M read row M - 1 */
#pragma unroll
            for (int i = 0; i < TM; ++i)
                arow[i] = A + min(m0 + GEMM_ROW(i, ly), M - 1) * lda;
#endif
            /* the NR column tiles in turn, over the same rows of op(A) (now in L1) */
            for (int t = 0; t < tiles; ++t) {
#pragma unroll
                for (int i = 0; i < TM; ++i)
#pragma unroll
                    for (int j = 0; j < NVEC; ++j)
                        acc[i][j] = kb == 0 ? (realN)0 : stash[r][t][i][j];
#if TRANS_A /* op(A) from its packed k-block, rows relative to the work-group's first */
                GEMM_STEPS_NARROW(GEMM_NARROW(n_wg0 + t * NTW, N, lx), acc, k, kb, kend,
                                  i, apack[cur][k - kb][m0 - m_wg0 + GEMM_ROW(i, ly)],
                                  j, bpack[cur][t][k - kb][j])
#else /* op(A) from its rows in place */
                GEMM_STEPS_NARROW(GEMM_NARROW(n_wg0 + t * NTW, N, lx), acc, k, kb, kend,
                                  i, arow[i][k], j, bpack[cur][t][k - kb][j])
#endif
                if (kend == K) {
                    gemm_store_tile(C, ldc, strideC, M, N, m0, n_wg0 + t * NTW, lx, ly, acc,
                                    alpha, beta GEMM_EPI_ARG);
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
                gemm_store_tile(C, ldc, strideC, M, N, m_wg0 + r * (TM * WGD_M), n_wg0 + t * NTW,
                                lx, ly, acc, alpha, beta GEMM_EPI_ARG);
    /* }}} */
#endif
}
