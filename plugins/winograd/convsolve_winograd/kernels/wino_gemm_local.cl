/* wino_gemm_local.cl: the batched products of wino_gemm.cl (WRW = 0: forward, backward-data) and
 * wino_gemm_wrw.cl (WRW = 1: backward-weights) shaped for GPUs, from the same operands in the
 * same workspace layouts (their banners give the sums and the layouts), with the same
 * arguments.
 *
 * Work-group (bx, by, b) computes the BM x BN block of the product at rows by * BM and columns
 * bx * BN of batch b = pos * G + g: forward the rows are output channels and the columns tiles,
 * backward-weights rows output channels and columns input channels.  It walks the reduction (D
 * channels; backward-weights the P tiles of the chunk) in slices of BK staged in local memory,
 * reduction-major: as[k][row] (rows LDA = BM + PAD_A apart), bs[k][col] (rows of BN); with two
 * buffers, the next slice travels global -> registers -> the other buffer while this one is
 * used, one barrier per slice.  Global loads are coalesced: consecutive work-items take
 * consecutive addresses (forward: U's panel rows of UPACK, two panels side by side per warp,
 * and V's row segments; backward-weights: E's rows along the tiles, X's tile rows along the
 * channels).  Local stores are conflict-free (forward: a warp stores 32 consecutive elements;
 * backward-weights' transposing stores of E: PAD_A = 4 spreads BK = 8 over every bank, BK = 16
 * two-way).  Work-item (tx, ty) owns RM rows ((i / 4) * WGM + ty) * 4 + i % 4 and RN
 * columns ((j / 4) * WGN + tx) * 4 + j % 4: it reads float4s of the slices
 * that neighbouring work-items read side by side or broadcast (no bank conflicts).
 *
 * Edges: operands past the product's rows, columns or reduction are read as zero (forward, U's
 * padded rows past Rows up to the panel's end repeat the last row: computed, not stored), and
 * only rows < Rows (Kg) and columns < P (Cg) are stored: M's columns past P and S's past Cg
 * (inside their rows' pitch) keep what they held.  Every sum runs over the reduction in order,
 * float32 fma (no TF32): deterministic.
 *
 * wino_gemm_local(u, u_off, u_plane, v, v_off, mm, mm_off, Rows, D, G, P, pitch, npos)
 * wino_gemm_wrw_local(e, e_off, e_pitch, x, x_off, x_row, x_plane, s, s_off, s_plane, Kg, Cg,
 *                     Cgpad, G, tiles, npos, accumulate)
 * Range: 3-D, (ceil(cols / BN) * WGN, ceil(rows / BM) * WGM, npos * G), local (WGN, WGM, 1);
 * backward-weights with SPLIT > 1, npos * G * SPLIT: split q sums its own run of the chunk's
 * tiles (whole BK slices, in order) into its own copy of S, npos * s_plane further on, which
 * wino_filter_out adds up in order (a deep reduction over a small dw fills a GPU: split-K).
 * Local memory: 2 * BK * (LDA + BN) * 4 bytes (configs.local_bytes).
 *
 * Defines read: WRW, BM, BN, BK, RM, RN, SPLIT, CS_PRECISION (winograd_common.cl).
 */
#include "winograd_common.cl"

#ifndef WRW
#define WRW 0 /* 1: the backward-weights product (wino_gemm_wrw_local) */
#endif
#ifndef BM
#define BM 64 /* rows of the product per work-group (a multiple of UPACK) */
#endif
#ifndef BN
#define BN 64 /* columns of the product per work-group */
#endif
#ifndef BK
#define BK 8  /* reduction slice staged in local memory at a time */
#endif
#ifndef RM
#define RM 4 /* rows per work-item */
#endif
#ifndef RN
#define RN 4 /* columns per work-item */
#endif
#ifndef SPLIT
#define SPLIT 1 /* backward-weights: the tiles' sum in this many parts, each to its own S */
#endif

#define WGM (BM / RM)                 /* work-items along the rows */
#define WGN (BN / RN)                 /* work-items along the columns */
#define WGS (WGM * WGN)               /* work-group size */
#define LA (BM * BK / WGS)            /* elements of as each work-item stages per slice */
#define LB (BN * BK / WGS)            /* elements of bs each work-item stages per slice */
#define PAD_A 4
#define LDA (BM + PAD_A)

#if BM % UPACK || BM % RM || BN % RN || RM % 4 || RN % 4
#error "wino_gemm_local.cl: BM a multiple of 16 and of RM, BN of RN, RM and RN of 4"
#endif
#if (BM * BK) % WGS || (BN * BK) % WGS
#error "wino_gemm_local.cl: the work-group must divide both staged slices"
#endif

/* Work-item lid's share of the slice from k0 on, global -> registers (zero outside). */
#if WRW
#define GL_ROW(e) ((e) / BK)                       /* E: k fastest along the reduction */
#define GL_AK(e) ((e) % BK)
#define GL_A(e, k0) (r0 + GL_ROW(e) < Kg && (k0) + GL_AK(e) < P                        \
                     ? ab[(size_t)(r0 + GL_ROW(e)) * e_pitch + (k0) + GL_AK(e)] : 0.0f)
#define GL_B(e, k0) ((k0) + (e) / BN < P && c0 + (e) % BN < Cg                            \
                     ? bb[(size_t)((k0) + (e) / BN) * x_row + c0 + (e) % BN] : 0.0f)
#else
#define GL_ROW(e) (((e) / UPACK) % (BM / UPACK) * UPACK + (e) % UPACK) /* panels side by side */
#define GL_AK(e) ((e) / BM)
#define GL_A(e, k0) ((r0 + GL_ROW(e)) / UPACK < upanels && (k0) + GL_AK(e) < D              \
                     ? ab[((size_t)((r0 + GL_ROW(e)) / UPACK) * D + (k0) + GL_AK(e)) * UPACK \
                          + (e) % UPACK] : 0.0f)
#define GL_B(e, k0) ((k0) + (e) / BN < D && c0 + (e) % BN < P                             \
                     ? bb[(size_t)((k0) + (e) / BN) * pitch + c0 + (e) % BN] : 0.0f)
#endif
#define GL_LOAD(ra, rb, k0)                                                            \
    {                                                                                  \
        _Pragma("unroll") for (int l_ = 0; l_ < LA; ++l_)                              \
            ra[l_] = GL_A(l_ * WGS + lid, k0);                                         \
        _Pragma("unroll") for (int l_ = 0; l_ < LB; ++l_)                              \
            rb[l_] = GL_B(l_ * WGS + lid, k0);                                         \
    }
/* ... registers -> the local slices (buffer buf). */
#define GL_STAGE(ra, rb, buf)                                                          \
    {                                                                                  \
        __local float *as_ = (__local float *)as_v[buf];                               \
        __local float *bs_ = (__local float *)bs_v[buf];                               \
        _Pragma("unroll") for (int l_ = 0; l_ < LA; ++l_)                              \
            as_[GL_AK(l_ * WGS + lid) * LDA + GL_ROW(l_ * WGS + lid)] = ra[l_];        \
        _Pragma("unroll") for (int l_ = 0; l_ < LB; ++l_)                              \
            bs_[l_ * WGS + lid] = rb[l_];                                              \
    }

/* The product's block: as above, given ab, bb (the batch's operands), the bounds' names and
 * the reduction's length `depth`; ends with acc[RM][RN] computed. */
#define GL_PRODUCT(depth)                                                              \
    __local float4 as_v[2][BK * LDA / 4];                                              \
    __local float4 bs_v[2][BK * BN / 4];                                               \
    float acc[RM][RN];                                                                 \
    _Pragma("unroll") for (int i = 0; i < RM; ++i)                                     \
        _Pragma("unroll") for (int j = 0; j < RN; ++j)                                 \
            acc[i][j] = 0.0f;                                                          \
    float ra[LA], rb[LB];                                                              \
    const int slices = CS_DIV_UP(depth, BK);                                           \
    GL_LOAD(ra, rb, 0)                                                                 \
    GL_STAGE(ra, rb, 0)                                                                \
    barrier(CLK_LOCAL_MEM_FENCE);                                                      \
    for (int t = 0; t < slices; ++t) {                                                 \
        const int cur = t & 1;                                                         \
        if (t + 1 < slices)                                                            \
            GL_LOAD(ra, rb, (t + 1) * BK)                                              \
        _Pragma("unroll") for (int k = 0; k < BK; ++k) {                               \
            float a[RM], b[RN];                                                        \
            _Pragma("unroll") for (int i = 0; i < RM / 4; ++i)                         \
                vstore4(as_v[cur][k * (LDA / 4) + i * WGM + ty], 0, a + i * 4);        \
            _Pragma("unroll") for (int j = 0; j < RN / 4; ++j)                         \
                vstore4(bs_v[cur][k * (BN / 4) + j * WGN + tx], 0, b + j * 4);         \
            _Pragma("unroll") for (int i = 0; i < RM; ++i)                             \
                _Pragma("unroll") for (int j = 0; j < RN; ++j)                         \
                    acc[i][j] = fma(a[i], b[j], acc[i][j]);                            \
        }                                                                              \
        if (t + 1 < slices)                                                            \
            GL_STAGE(ra, rb, cur ^ 1)                                                  \
        barrier(CLK_LOCAL_MEM_FENCE);                                                  \
    }

/* The row and column of the block that acc[i][j] is. */
#define GL_OWN_ROW(i) (r0 + ((i) / 4 * WGM + ty) * 4 + (i) % 4)
#define GL_OWN_COL(j) (c0 + ((j) / 4 * WGN + tx) * 4 + (j) % 4)

#if WRW
__kernel __attribute__((reqd_work_group_size(WGN, WGM, 1)))
void wino_gemm_wrw_local(__global const real *restrict e, const int e_off, const int e_pitch,
                         __global const real *restrict x, const int x_off, const int x_row,
                         const int x_plane, __global real *restrict s, const int s_off,
                         const int s_plane, const int Kg, const int Cg, const int Cgpad,
                         const int G, const int tiles, const int npos, const int accumulate)
{
    const int tx = get_local_id(0), ty = get_local_id(1), lid = ty * WGN + tx;
    const int c0 = get_group_id(0) * BN, r0 = get_group_id(1) * BM;
    const int b = get_group_id(2) % (npos * G), split = get_group_id(2) / (npos * G);
    const int pos = b / G, g = b % G;
    /* this split's tiles: p0 .. p0 + P - 1, whole BK slices but the last (none past the end) */
    const int span = CS_DIV_UP(CS_DIV_UP(tiles, SPLIT), BK) * BK, p0 = split * span;
    const int P = max(0, min(span, tiles - p0));
    __global const real *ab = e + e_off + ((size_t)pos * G + g) * Kg * e_pitch + p0;
    __global const real *bb = x + x_off + (size_t)pos * x_plane + (size_t)p0 * x_row + g * Cgpad;
    __global real *sb = s + s_off + ((size_t)split * npos + pos) * s_plane
                        + (size_t)g * Kg * Cgpad;
    GL_PRODUCT(P)
#pragma unroll
    for (int i = 0; i < RM; ++i)
        if (GL_OWN_ROW(i) < Kg)
#pragma unroll
            for (int j = 0; j < RN; ++j)
                if (GL_OWN_COL(j) < Cg) {
                    __global real *dst = sb + (size_t)GL_OWN_ROW(i) * Cgpad + GL_OWN_COL(j);
                    *dst = accumulate ? acc[i][j] + *dst : acc[i][j];
                }
}
#else
__kernel __attribute__((reqd_work_group_size(WGN, WGM, 1)))
void wino_gemm_local(__global const real *restrict u, const int u_off, const int u_plane,
                     __global const real *restrict v, const int v_off,
                     __global real *restrict mm, const int mm_off,
                     const int Rows, const int D, const int G, const int P, const int pitch,
                     const int npos)
{
    const int tx = get_local_id(0), ty = get_local_id(1), lid = ty * WGN + tx;
    const int c0 = get_group_id(0) * BN, r0 = get_group_id(1) * BM, b = get_group_id(2);
    const int pos = b / G, g = b % G;
    const int upanels = CS_DIV_UP(Rows, UPACK);
    __global const real *ab = u + u_off + (size_t)pos * u_plane + (size_t)g * upanels * D * UPACK;
    __global const real *bb = v + v_off + ((size_t)pos * G + g) * D * pitch;
    __global real *mb = mm + mm_off + ((size_t)pos * G + g) * Rows * pitch;
    GL_PRODUCT(D)
#pragma unroll
    for (int i = 0; i < RM; ++i)
        if (GL_OWN_ROW(i) < Rows)
#pragma unroll
            for (int j = 0; j < RN; ++j)
                if (GL_OWN_COL(j) < P)
                    mb[(size_t)GL_OWN_ROW(i) * pitch + GL_OWN_COL(j)] = acc[i][j];
}
#endif
