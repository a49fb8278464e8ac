/* gemm_local.cl: the kernel gemm for USE_LOCAL == 1 (GPUs), tiles staged in local memory.
 *
 * Included by gemm.cl, whose banner gives the kernel's signature, layouts, launch geometry and
 * work decomposition; it defines the kernel here so that its body is this path's code. Needs
 * MR == 1 and NR == 1. The work-group stages KWG-deep slices of op(A) and op(B) in local
 * memory, k-major whatever the transposition (it is absorbed in the staging):
 *   a_tiles[buffer][k * LDAS + m] (MWG rows + LPAD), b_tiles[buffer][k * LDBS + n] (NWG + LPAD),
 * each work-item loading LA elements of op(A) and LB of op(B) per slice, consecutive work-items
 * on consecutive addresses of the stored matrix (coalesced). Work-items then read their rows as
 * VWM-wide runs and their columns as VW-wide vectors, WGD_M and WGD_N runs apart, so that
 * neighbouring work-items read neighbouring vectors (no bank conflicts). With DOUBLE_BUF two
 * slices alternate, the next one travelling global -> registers -> local while this one is used.
 * With COL_IMAGES a work-item finds where each column of its op(B) share lies (its image and
 * pixel) once, before the first slice: the columns of a share are the same in every slice.
 *
 * Defines read: TRANS_A, TRANS_B, COL_IMAGES, WGD_M, WGD_N, TM, TN, VW, VWM, KWG, DOUBLE_BUF, LPAD
 * (tunables, defaults in gemm_common.cl).
 */
#include "gemm_common.cl"

#if VWM == 1
typedef real realM;
#define GEMM_VSTOREM(v, p) (*(p) = (v))
#else
typedef GEMM_CAT(GEMM_REAL, VWM) realM;
#define GEMM_VSTOREM(v, p) GEMM_CAT(vstore, VWM)(v, 0, p)
#endif

/* {{{ staging: global -> registers -> local */

/* Declares const ints m, k (op(A)) or k, n (op(B)) named by the caller: where element e of
 * work-item lid's share of a slice lies. Consecutive work-items take consecutive addresses of the
 * stored matrix (coalescing). */
#if TRANS_A
#define GEMM_SHARE_A(m, k, e, lid)                                                      \
    const int m = ((e) * WGS + (lid)) % MWG, k = ((e) * WGS + (lid)) / MWG
#else
#define GEMM_SHARE_A(m, k, e, lid)                                                      \
    const int k = ((e) * WGS + (lid)) % KWG, m = ((e) * WGS + (lid)) / KWG
#endif
#if TRANS_B
#define GEMM_SHARE_B(k, n, e, lid)                                                      \
    const int k = ((e) * WGS + (lid)) % KWG, n = ((e) * WGS + (lid)) / KWG
#else
#define GEMM_SHARE_B(k, n, e, lid)                                                      \
    const int n = ((e) * WGS + (lid)) % NWG, k = ((e) * WGS + (lid)) / NWG
#endif

/* op(B)[k][n], element e of a work-item's share: with COL_IMAGES from bcol[e], the element
 * offset of its column (gemm), which the caller's parameter list declares (GEMM_B_COLS). When
 * the work-group's items span whole rows of the slice (WGS a multiple of NWG), every element of
 * a share lies in one column: bcol[0]. */
#if COL_IMAGES
#define GEMM_B_COLS , const int bcol[LB]
#define GEMM_B_COLS_ARG , bcol
#define GEMM_B_ONE_COLUMN (WGS % NWG == 0)
#define GEMM_B_SHARE(B, ldb, k, n, e) (B)[(k) * (ldb) + bcol[GEMM_B_ONE_COLUMN ? 0 : (e)]]
#else
#define GEMM_B_COLS
#define GEMM_B_COLS_ARG
#define GEMM_B_SHARE(B, ldb, k, n, e) GEMM_B(B, ldb, k, n)
#endif

/* Work-item lid's share of the slices starting at k0, global -> registers; zeros outside. */
GEMM_INLINE void gemm_global_to_reg(const __global real *A, int lda, const __global real *B,
                                    int ldb, int M, int N, int K, int m_wg0, int n_wg0, int k0,
                                    int lid, bool full_mn, real ra[LA], real rb[LB] GEMM_B_COLS)
{
    if (full_mn && k0 + KWG <= K) {
#pragma unroll
        for (int e = 0; e < LA; ++e) {
            GEMM_SHARE_A(m, k, e, lid);
            ra[e] = GEMM_A(A, lda, m_wg0 + m, k0 + k);
        }
#pragma unroll
        for (int e = 0; e < LB; ++e) {
            GEMM_SHARE_B(k, n, e, lid);
            rb[e] = GEMM_B_SHARE(B, ldb, k0 + k, n_wg0 + n, e);
        }
    } else {
#pragma unroll
        for (int e = 0; e < LA; ++e) {
            GEMM_SHARE_A(m, k, e, lid);
            ra[e] = (m_wg0 + m < M && k0 + k < K) ? GEMM_A(A, lda, m_wg0 + m, k0 + k) : (real)0;
        }
#pragma unroll
        for (int e = 0; e < LB; ++e) {
            GEMM_SHARE_B(k, n, e, lid);
            rb[e] = (k0 + k < K && n_wg0 + n < N) ? GEMM_B_SHARE(B, ldb, k0 + k, n_wg0 + n, e)
                                                  : (real)0;
        }
    }
}

/* Work-item lid's share, registers -> the local slices as[k][m], bs[k][n]. */
GEMM_INLINE void gemm_reg_to_local(__local real *as, __local real *bs, int lid,
                                   const real ra[LA], const real rb[LB])
{
#pragma unroll
    for (int e = 0; e < LA; ++e) {
        GEMM_SHARE_A(m, k, e, lid);
        as[k * LDAS + m] = ra[e];
    }
#pragma unroll
    for (int e = 0; e < LB; ++e) {
        GEMM_SHARE_B(k, n, e, lid);
        bs[k * LDBS + n] = rb[e];
    }
}
/* }}} */

/* acc += the local slices, KWG steps of k, for work-item (lx, ly). */
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
    C += offC + bat * strideC;

    realN acc[TM][NVEC];
    GEMM_ZERO(acc);
    /* the work-group stages KWG-deep slices, k-major */
    __local realM a_tiles[1 + DOUBLE_BUF][KWG * LDAS / VWM];
    __local realN b_tiles[1 + DOUBLE_BUF][KWG * LDBS / VW];
    const int lid = ly * WGD_N + lx;
    const bool full_mn = (m_wg0 + MWG <= M) && (n_wg0 + NWG <= N);
    real ra[LA], rb[LB];
    const int ntiles = CS_DIV_UP(K, KWG);
#if COL_IMAGES
    int bcol[LB]; /* where the share's columns lie in B (columns past N: column N - 1's) */
#pragma unroll
    for (int e = 0; e < (GEMM_B_ONE_COLUMN ? 1 : LB); ++e) {
        GEMM_SHARE_B(k, n, e, lid);
        (void)k;
        bcol[e] = GEMM_COL_AT(min(n_wg0 + n, N - 1), ldb, strideB);
    }
#endif

    gemm_global_to_reg(A, lda, B, ldb, M, N, K, m_wg0, n_wg0, 0, lid, full_mn, ra,
                       rb GEMM_B_COLS_ARG);
    gemm_reg_to_local((__local real *)a_tiles[0], (__local real *)b_tiles[0], lid, ra, rb);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int t = 0; t < ntiles; ++t) {
#if DOUBLE_BUF
        /* buffer t & 1 is read while tile t + 1 travels global -> registers -> buffer
         * (t + 1) & 1, which nobody reads since the barrier that ended step t - 1 */
        const int cur = t & 1;
        if (t + 1 < ntiles)
            gemm_global_to_reg(A, lda, B, ldb, M, N, K, m_wg0, n_wg0, (t + 1) * KWG, lid,
                               full_mn, ra, rb GEMM_B_COLS_ARG);
        gemm_compute(a_tiles[cur], b_tiles[cur], lx, ly, acc);
        if (t + 1 < ntiles)
            gemm_reg_to_local((__local real *)a_tiles[cur ^ 1],
                              (__local real *)b_tiles[cur ^ 1], lid, ra, rb);
        barrier(CLK_LOCAL_MEM_FENCE);
#else
        if (t > 0) {
            barrier(CLK_LOCAL_MEM_FENCE);
            gemm_global_to_reg(A, lda, B, ldb, M, N, K, m_wg0, n_wg0, t * KWG, lid, full_mn,
                               ra, rb GEMM_B_COLS_ARG);
            gemm_reg_to_local((__local real *)a_tiles[0], (__local real *)b_tiles[0], lid,
                              ra, rb);
            barrier(CLK_LOCAL_MEM_FENCE);
        }
        gemm_compute(a_tiles[0], b_tiles[0], lx, ly, acc);
#endif
    }
    GEMM_EPI_INIT; /* here, not at the start: its values need no registers during the loop */
    gemm_store_tile(C, ldc, strideC, M, N, m_wg0, n_wg0, lx, ly, acc, alpha,
                    beta GEMM_EPI_ARG);
}
