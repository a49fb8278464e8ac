/* gemm_common.cl: the tunables of gemm.cl and what both of its paths share.
 *
 * Part of gemm.cl (whose banner gives the kernel's signature, layouts and launch geometry);
 * included by it and by its two paths, gemm_cpu.cl (USE_LOCAL == 0) and gemm_local.cl
 * (USE_LOCAL == 1), each of which defines the kernel. Defines here: every tunable with its
 * default (the defaults are a measured CPU set; TUNING.md has the others), the derived tile
 * sizes, #error checks on impossible combinations, the vector type realN, the register tile's
 * row and column map (GEMM_ROW, GEMM_COL), op(A) and op(B) element access, the kernel's
 * parameter list (GEMM_PARAMS) and the stores of a register tile to C, with the output's
 * epilogue when CS_EPI (convsolve_epilogue.h: C is then the convolution's output, row m of batch
 * b being channel chanOff + b * chanStride + m, z read at C's offsets).
 *
 * Defines read: the tunables below; from convsolve.h: CS_PRECISION (`real`); from
 * convsolve_epilogue.h: CS_EPI and the epilogue's structure.
 */
#ifndef GEMM_COMMON_CL
#define GEMM_COMMON_CL
#include "convsolve_epilogue.h"

/* {{{ tunables */
#ifndef TRANS_A
#define TRANS_A 0 /* 1: A is stored K x M and op(A) = A^T */
#endif
#ifndef TRANS_B
#define TRANS_B 0 /* 1: B is stored N x K and op(B) = B^T */
#endif
#ifndef COL_IMAGES
#define COL_IMAGES 0 /* 1: the columns of op(B) and C run over images (gemm.cl's banner) */
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
#if COL_IMAGES && ((!USE_LOCAL && MR == 1) || TRANS_B)
#error "gemm.cl: COL_IMAGES needs TRANS_B == 0 and USE_LOCAL or MR > 1"
#endif
#if USE_LOCAL
#if (MWG * KWG) % WGS != 0 || (NWG * KWG) % WGS != 0
#error "gemm.cl: USE_LOCAL needs MWG * KWG and NWG * KWG to be multiples of WGD_M * WGD_N"
#endif
#if LPAD % VW != 0 || LPAD % VWM != 0
#error "gemm.cl: LPAD must be a multiple of VW and VWM"
#endif
#endif
/* }}} */

/* {{{ vector types, element access */
#define GEMM_CAT_(a, b) a##b
#define GEMM_CAT(a, b) GEMM_CAT_(a, b)
#if CS_PRECISION == 16
#define GEMM_REAL half /* `real` is a typedef; vector type names are built from this */
#else
#define GEMM_REAL float
#endif
#if CS_PRECISION == 16
#define GEMM_MASK short /* select()'s mask of a realN: integers of its element's size */
#else
#define GEMM_MASK int
#endif
#if VW == 1
typedef real realN;
typedef GEMM_MASK GEMM_MASKN;
#define GEMM_VLOADN(p) (*(p))
#define GEMM_VSTOREN(v, p) (*(p) = (v))
#define GEMM_LANES 0
#else
typedef GEMM_CAT(GEMM_REAL, VW) realN;
typedef GEMM_CAT(GEMM_MASK, VW) GEMM_MASKN;
#define GEMM_VLOADN(p) GEMM_CAT(vload, VW)(0, p)
#define GEMM_VSTOREN(v, p) GEMM_CAT(vstore, VW)(v, 0, p)
#if VW == 2
#define GEMM_LANES ((GEMM_MASKN)(0, 1)) /* lane i holds i */
#elif VW == 4
#define GEMM_LANES ((GEMM_MASKN)(0, 1, 2, 3))
#elif VW == 8
#define GEMM_LANES ((GEMM_MASKN)(0, 1, 2, 3, 4, 5, 6, 7))
#else
#define GEMM_LANES ((GEMM_MASKN)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15))
#endif
#endif

/* Helpers must be inlined: the register tile is passed by pointer and has to stay in
 * registers (PoCL otherwise calls the helpers out of line and keeps acc in memory). */
#define GEMM_INLINE inline __attribute__((always_inline))

/* Row of C (relative to the work-group's first row) of register-tile row i of work-item row ly. */
#define GEMM_ROW(i, ly) ((((i) / VWM) * WGD_M + (ly)) * VWM + (i) % VWM)
/* Column of C (relative to the work-group's first column) of lane 0 of register vector j of
 * work-item column lx. */
#define GEMM_COL(j, lx) (((j) * WGD_N + (lx)) * VW)

/* The element offset of column n in row 0 of a matrix with leading dimension ld whose images
 * lie stride apart: with COL_IMAGES, pixel n % ld of image n / ld; else n. */
#if COL_IMAGES
#define GEMM_COL_AT(n, ld, stride) ((n) / (ld) * (stride) + (n) % (ld))
#else
#define GEMM_COL_AT(n, ld, stride) (n)
#endif
/* Whether the VW columns from column n all lie in the N columns and, with COL_IMAGES, in n's
 * image (one vector at GEMM_COL_AT(n, ld, stride) holds them). */
#define GEMM_WHOLE(n, N, ld) ((n) + VW <= (N) && (!COL_IMAGES || (n) % (ld) + VW <= (ld)))

/* op(A)[m][k] and op(B)[k][n] as lvalues, A and B stored with leading dimensions lda, ldb. */
#if TRANS_A
#define GEMM_A(A, lda, m, k) (A)[(k) * (lda) + (m)]
#else
#define GEMM_A(A, lda, m, k) (A)[(m) * (lda) + (k)]
#endif
#if TRANS_B
#define GEMM_B(B, ldb, k, n) (B)[(n) * (ldb) + (k)]
#else
#define GEMM_B(B, ldb, k, n) (B)[(k) * (ldb) + (n)]
#endif
/* }}} */

/* {{{ the kernel's parameters, the register tile */

/* The epilogue's parameters after GEMM_PARAMS, its values made in the kernel (GEMM_EPI_INIT,
 * after C is advanced to its batch), and passed on to the stores; nothing without CS_EPI. */
#if CS_EPI
#define GEMM_EPI_PARAMS , CS_EPILOGUE_PARAMS, const int chanOff, const int chanStride
#define GEMM_EPI_INIT                                                                  \
    const cs_epilogue epi = CS_EPILOGUE_INIT(chanOff + (int)bat * chanStride, offC + bat * strideC)
#define GEMM_EPI_DECL , const cs_epilogue epi
#define GEMM_EPI_ARG , epi
#define GEMM_LOADN_AT(p, at) GEMM_VLOADN((p) + (at))
#else
#define GEMM_EPI_PARAMS
#define GEMM_EPI_INIT
#define GEMM_EPI_DECL
#define GEMM_EPI_ARG
#endif

/* The parameters of the kernel gemm (gemm.cl's banner says what they are), as each path's
 * definition of it declares them. */
#define GEMM_PARAMS                                                                    \
    const int M, const int N, const int K, const real alpha, const real beta,          \
    const __global real *restrict A, const int offA, const int lda, const int strideA, \
    const __global real *restrict B, const int offB, const int ldb, const int strideB, \
    __global real *C, const int offC, const int ldc, const int strideC GEMM_EPI_PARAMS

/* acc = 0, for the register tile acc[TM][NVEC]. */
#define GEMM_ZERO(acc)                                                              \
    _Pragma("unroll") for (int i_ = 0; i_ < TM; ++i_)                               \
        _Pragma("unroll") for (int j_ = 0; j_ < NVEC; ++j_)                         \
            (acc)[i_][j_] = (realN)0
/* }}} */

/* {{{ stores to C */

/* C[m][n ..] = alpha * acc + beta * C[m][n ..] for the lanes with n + l < N; with CS_EPI, the
 * epilogue of acc instead (alpha and beta are the epilogue's). Lane 0 lies at column offset col
 * of row m (GEMM_COL_AT); `whole`: every lane is in C and, with COL_IMAGES, in lane 0's image,
 * so one vector store takes them (else lane by lane, each at its own offset). */
GEMM_INLINE void gemm_store(__global real *C, int ldc, int strideC, int m, int n, int N, int col,
                            bool whole, realN acc, real alpha, real beta GEMM_EPI_DECL)
{
    const int at = m * ldc + col;
    __global real *c = C + at;
#if CS_EPI
    if (whole) {
        realN v = acc;
        CS_EPILOGUE(realN, GEMM_LOADN_AT, epi, v, epi.chan + m, C, at);
        GEMM_VSTOREN(v, c);
    } else { /* a rolled loop: unrolled at every edge store, an activation took PoCL seconds */
        real t[VW];
        GEMM_VSTOREN(acc, t);
        for (int l = 0; l < VW && n + l < N; ++l) {
            const int at_l = m * ldc + GEMM_COL_AT(n + l, ldc, strideC);
            real v = t[l];
            CS_EPILOGUE(real, CS_LOAD1, epi, v, epi.chan + m, C, at_l);
            C[at_l] = v;
        }
    }
#else
    if (whole) {
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
                const int at_l = m * ldc + GEMM_COL_AT(n + l, ldc, strideC);
                real v = alpha * t[l];
                if (beta != (real)0)
                    v += beta * C[at_l];
                C[at_l] = v;
            }
        }
    }
#endif
}

/* The register tile acc of work-item (lx, ly) whose row block starts at row m0 and column
 * tile at column n0, to C (rows and columns past M, N are not stored). Where each vector's
 * columns lie is found once for all rows. */
GEMM_INLINE void gemm_store_tile(__global real *C, int ldc, int strideC, int M, int N, int m0,
                                 int n0, int lx, int ly, realN acc[TM][NVEC], real alpha,
                                 real beta GEMM_EPI_DECL)
{
    int col[NVEC];
    int whole[NVEC];
#pragma unroll
    for (int j = 0; j < NVEC; ++j) {
        const int n = n0 + GEMM_COL(j, lx);
        col[j] = GEMM_COL_AT(n, ldc, strideC);
        whole[j] = GEMM_WHOLE(n, N, ldc);
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int m = m0 + GEMM_ROW(i, ly);
        if (m < M) {
#pragma unroll
            for (int j = 0; j < NVEC; ++j) {
                const int n = n0 + GEMM_COL(j, lx);
                if (n < N)
                    gemm_store(C, ldc, strideC, m, n, N, col[j], whole[j], acc[i][j], alpha,
                               beta GEMM_EPI_ARG);
            }
        }
    }
}

/* }}} */

#endif /* GEMM_COMMON_CL */
