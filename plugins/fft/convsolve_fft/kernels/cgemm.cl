/* cgemm.cl: batched complex matrix products of spectra, one product per frequency.
 *
 * Operands are matrices of spectra in the fft2d kernels' layout (fft_common.cl): a matrix of P
 * planes (spectra) stores frequencies by blocks of 16, FFT_SPECTRUM(f, p, P) =
 * ((f / 16 * P + p) * 2) * 16 + f % 16 its real parts (imaginary parts 16 floats later), so one
 * block of a whole matrix is contiguous.
 * For every frequency f < Fp and group g:
 *   C[g](m, n)  = sum_k conj(A[g](m, k)) * B[g](k, n)     (+ C[g](m, n) when accumulate)
 * (every direction is a correlation: layout.py). Element (m, k) of A[g] is
 * plane g * a_g + m * a_m + k * a_k of the matrix at a_off of a_planes planes (B, C likewise),
 * so transposed operands are only strides. The sum runs over k in order: deterministic.
 *
 * Kernel:
 *   cgemm(M, N, K, blocks_n, A, a_off, a_planes, a_g, a_m, a_k, B, b_off, b_planes, b_g, b_k,
 *         b_n, C, c_off, c_planes, c_g, c_m, c_n, accumulate, Fp)     (offsets in floats)
 *   global size = (CS_DIV_UP(M, TM) * blocks_n, round_up(Fp / GV, GL), groups),
 *   local size = (1, GL, 1), blocks_n = CS_DIV_UP(N, TN).
 * A work-item computes a TM x TN tile of C for GV consecutive frequencies, one per vector lane,
 * so every frequency runs the same code with no edge cases (Fp is a multiple of 16); rows and
 * columns past M and N are clamped on loading and skipped on storing. The tiles of one
 * frequency block come first (dimension 0): consecutive work-groups share its slab.
 *
 * Defines read (tunables): GV, TM, TN, GL.
 */
#include "convsolve.h"

#ifndef GV
#define GV 16   /* frequencies per work-item, one per vector lane (1, 4, 8 or 16; divides 16) */
#endif
#ifndef TM
#define TM 4    /* rows of C a work-item computes */
#endif
#ifndef TN
#define TN 2    /* columns of C a work-item computes */
#endif
#ifndef GL
#define GL 1    /* work-items per group, along the frequencies */
#endif

#define CG_CAT2(a, b) a##b
#define CG_CAT(a, b) CG_CAT2(a, b)
#if GV == 1
typedef float gvec;
#define GLOAD(p) (*(p))
#define GSTORE(v, p) (*(p) = (v))
#elif GV == 4 || GV == 8 || GV == 16
typedef CG_CAT(float, GV) gvec;
#define GLOAD(p) CG_CAT(vload, GV)(0, p)
#define GSTORE(v, p) CG_CAT(vstore, GV)(v, 0, p)
#else
#error "GV must be 1, 4, 8 or 16"
#endif

/* Real part of frequency f (a multiple of GV) of plane p of a matrix of P planes. */
#define CG_AT(f, p, P) ((((size_t)((f) / 16) * (P) + (p)) * 2) * 16 + (f) % 16)

__kernel __attribute__((reqd_work_group_size(1, GL, 1)))
void cgemm(const int M, const int N, const int K, const int blocks_n,
           __global const float *A, const int a_off, const int a_planes, const int a_g,
           const int a_m, const int a_k,
           __global const float *B, const int b_off, const int b_planes, const int b_g,
           const int b_k, const int b_n,
           __global float *C, const int c_off, const int c_planes, const int c_g, const int c_m,
           const int c_n, const int accumulate, const int Fp)
{
    const int tile = get_global_id(0), f = get_global_id(1) * GV, g = get_global_id(2);
    if (f >= Fp)
        return;
    const int m0 = tile / blocks_n * TM, n0 = tile % blocks_n * TN;
    const size_t a_step = 32 * (size_t)a_k, b_step = 32 * (size_t)b_k;
    __global const float *a[TM], *b[TN];
    #pragma unroll
    for (int i = 0; i < TM; ++i)
        a[i] = A + a_off + CG_AT(f, g * a_g + min(m0 + i, M - 1) * a_m, a_planes);
    #pragma unroll
    for (int j = 0; j < TN; ++j)
        b[j] = B + b_off + CG_AT(f, g * b_g + min(n0 + j, N - 1) * b_n, b_planes);

    gvec re[TM][TN], im[TM][TN];
    #pragma unroll
    for (int i = 0; i < TM; ++i)
        #pragma unroll
        for (int j = 0; j < TN; ++j)
            re[i][j] = im[i][j] = (gvec)0.0f;
    for (int k = 0; k < K; ++k) {
        gvec ar[TM], ai[TM], br[TN], bi[TN];
        #pragma unroll
        for (int i = 0; i < TM; ++i) {
            ar[i] = GLOAD(a[i]);
            ai[i] = GLOAD(a[i] + 16);
            a[i] += a_step;
        }
        #pragma unroll
        for (int j = 0; j < TN; ++j) {
            br[j] = GLOAD(b[j]);
            bi[j] = GLOAD(b[j] + 16);
            b[j] += b_step;
        }
        #pragma unroll
        for (int i = 0; i < TM; ++i)
            #pragma unroll
            for (int j = 0; j < TN; ++j) {
                re[i][j] = fma(ar[i], br[j], re[i][j]);
                re[i][j] = fma(ai[i], bi[j], re[i][j]);
                im[i][j] = fma(ar[i], bi[j], im[i][j]);
                im[i][j] = fma(-ai[i], br[j], im[i][j]);
            }
    }
    #pragma unroll
    for (int i = 0; i < TM; ++i)
        #pragma unroll
        for (int j = 0; j < TN; ++j) {
            if (m0 + i >= M || n0 + j >= N)
                continue;
            __global float *c = C + c_off + CG_AT(f, g * c_g + (m0 + i) * c_m + (n0 + j) * c_n,
                                                  c_planes);
            if (accumulate) {
                re[i][j] += GLOAD(c);
                im[i][j] += GLOAD(c + 16);
            }
            GSTORE(re[i][j], c);
            GSTORE(im[i][j], c + 16);
        }
}
