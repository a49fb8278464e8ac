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
 *   With COL_IMAGES (USE_LOCAL or MR > 1, TRANS_B == 0, batch 1) the columns of op(B) and C run
 *   over the images of a convolution, side by side: column n is pixel n % ldb of image n / ldb, at
 *   B[(n / ldb) * strideB + k * ldb + n % ldb] and C[(n / ldc) * strideC + m * ldc + n % ldc]
 *   (ldb == ldc: the pixels of an image), so that one product covers every image.
 *   beta == 0 does not read C (C may hold garbage, NaN included).
 *   With CS_EPI (a convolution's output fused, convsolve_epilogue.h), C = the epilogue of
 *   op(A) * op(B) instead: alpha and beta are unused, the epilogue's own values follow the
 *   parameters below (CS_EPILOGUE_PARAMS, then int chanOff, int chanStride: row m of batch b is
 *   output channel chanOff + b * chanStride + m), and z is read at C's offsets.
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
 * Files (each opens with its own banner; this folder is on the include path). The path the
 * defines select defines the kernel, so that its body is that path's code (called as inlined
 * functions from one kernel, the paths compiled to different code on PoCL):
 *   gemm_common.cl  the tunables with their defaults, derived sizes, #error checks, shared helpers
 *   gemm_cpu.cl     USE_LOCAL == 0 (CPUs): register tiles fed straight from global memory;
 *                   MR == 1 streams op(A) and op(B), MR > 1 (the defaults) packs KB-deep blocks
 *                   of op(B) (and with TRANS_A of op(A)) into private memory
 *   gemm_local.cl   USE_LOCAL == 1 (GPUs; needs MR == 1 and NR == 1): KWG-deep slices of op(A)
 *                   and op(B) staged in local memory, optionally double-buffered
 *
 * Defines read (tunables, each with a default in gemm_common.cl): TRANS_A, TRANS_B, COL_IMAGES,
 * WGD_M, WGD_N, TM, TN, VW, VWM, KU, USE_LOCAL, MR, NR, KB, PF, KWG, DOUBLE_BUF, LPAD; from
 * convsolve.h: CS_PRECISION; from convsolve_epilogue.h: CS_EPI and the epilogue's CS_EPI_*.
 * Derived (in gemm_common.cl): MWG, NWG, NTW, WGS, NVEC, MGRP, LA, LB, LDAS, LDBS.
 * The defaults are a measured CPU set (AVX2, 2 cores); plugins/gemm/TUNING.md has the others.
 */
#include "gemm_common.cl"
#if USE_LOCAL
#include "gemm_local.cl"
#else
#include "gemm_cpu.cl"
#endif
