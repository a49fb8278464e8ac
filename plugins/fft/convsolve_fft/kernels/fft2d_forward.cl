/* fft2d.cl: batched 2-D real-to-complex FFTs of tensor planes into spectra, and back.
 *
 * A plane is FH x FW transform positions (FH even) filled from a tensor through a plane
 * descriptor (fft_common.cl: which tensor elements, zero elsewhere: padding, dilation gaps,
 * polyphase and tile windows). Its spectrum has KH = FH / 2 + 1 rows of frequencies along h
 * (the other half follows from the input being real) and FW along w, F = KH * FW in all, stored
 * as frequencies f < Fp (FFT_SPECTRUM's blocks; Fp a multiple of FFT_BLOCK, f >= F are zeros).
 * Frequency (kh, kw) is f = k0 * FW + kw * n + (kh - k0) where k0 = kh - kh % LANES starts its
 * block of n = min(LANES, KH - k0) rows: a work-item's LANES lanes are LANES consecutive f.
 *
 * Kernels (one work-group per plane: global size = planes * WG, local size = WG):
 *   fft2d_forward(tensor, tensor_offset, spectra, spectra_offset, planes, plans, twiddles, Fp,
 *                 tmp)
 *   fft2d_inverse(spectra, spectra_offset, tensor, tensor_offset, planes, plans, twiddles, Fp,
 *                 scale, tmp)
 * (offsets in floats: where the chunk's tensor and the spectra start; tmp only with USE_LOCAL).
 * plans[0] is the complex plan of length FH / 2, plans[1] that of length FW; tmp is local memory
 * of max(KB * FW, KB * LANES * WB) vcplx (KB = ceil(KH / LANES), WB = ceil(FW / LANES)).
 * The plane between the two passes lies in tmp (USE_LOCAL 1), or, for planes larger than the
 * device's local memory (USE_LOCAL 0), in the plane's own spectrum: entry (kb, w), the LANES
 * rows of block kb at column w, at the frequencies k0 * FW + w * n of block kb (the same slots
 * the forward's second pass reads and writes; the inverse overwrites its input spectra, their
 * last use), the passes separated by a global-memory barrier.
 *
 * Forward, per plane:
 *   pass 1 (per block of LANES columns): rows 2j and 2j + 1 as the real and imaginary part of
 *     a FH / 2 point complex transform along h, split into the KH frequencies of the real rows;
 *     blocks of LANES frequencies are transposed (lanes: columns -> frequencies kh) into tmp.
 *   pass 2 (per block of LANES frequencies kh): FW point complex transforms along w, stored.
 * Inverse: the same steps backwards (conjugate, forward transform, conjugate), the outputs
 * scaled by `scale` and written only where the descriptor places them (a crop window).
 * A column block the descriptor leaves empty skips its pass-1 transform.
 *
 * Defines read: LANES, MAXLEN, STREAM (fft_common.cl), WG, USE_LOCAL.
 */
#include "convsolve.h"
#include "fft_common.cl"

#ifndef WG
#define WG 1    /* work-items per plane (a work-group); CPUs: 1, GPUs: enough to fill the lanes */
#endif
#ifndef USE_LOCAL
#define USE_LOCAL 1 /* the plane between the passes: 1 in local memory, 0 in its spectrum */
#endif

/* {{{ loads and stores */

/* The columns of a block of lanes (lane_columns) and where its plane starts in the tensor. */
typedef struct { int col[LANES], how, shift; vint mask; size_t start; } fft_block;

/* Row p of a plane, lanes = the block's columns (-1: zero); 0 where the row lies outside. A
 * masked block reads one vector when it lies inside the tensor's buffer. */
FFT_INLINE vreal load_row(__global const float *plane, __global const fft_planes *d,
                          const int *coord, int p, const fft_block *b)
{
    int row = axis_index(&d->rows, p, coord[4], coord[2]);
    if (row < 0)
        return (vreal)0.0f;
    __global const float *line = plane + (size_t)row * d->cols.size;
    const int *col = b->col;
    if (b->how == FFT_CONTIGUOUS)
        return VLOAD(line + col[0]);
    long at = (long)b->start + (long)row * d->cols.size + b->shift;
    if (b->how == FFT_MASKED && at >= 0 && at + LANES <= d->extent)
        return select((vreal)0.0f, VLOAD(line + b->shift), b->mask);
    float v[LANES];
    #pragma unroll
    for (int l = 0; l < LANES; ++l)
        v[l] = col[l] >= 0 ? line[col[l]] : 0.0f;
    return VLOAD(v);
}

/* Writes row p of a plane where the descriptor places it. */
FFT_INLINE void store_row(__global float *plane, __global const fft_planes *d, const int *coord,
                          int p, const fft_block *b, vreal value)
{
    int row = axis_index(&d->rows, p, coord[4], coord[2]);
    if (row < 0)
        return;
    __global float *line = plane + (size_t)row * d->cols.size;
    const int *col = b->col;
    if (b->how == FFT_CONTIGUOUS) {
        VSTORE(value, line + col[0]);
        return;
    }
    float v[LANES];
    VSTORE(value, v);
    #pragma unroll
    for (int l = 0; l < LANES; ++l)
        if (col[l] >= 0)
            line[col[l]] = v[l];
}

/* Frequencies f..f+lanes-1 of spectrum plane p of a P-plane matrix (zeros in other lanes). */
FFT_INLINE vcplx load_spectrum(__global const float *s, int f, int p, int P, int lanes)
{
    if (lanes == LANES) {   /* f % LANES == 0: one block holds them */
        __global const float *re = s + FFT_SPECTRUM(f, p, P);
        return cx(VLOAD(re), VLOAD(re + FFT_BLOCK));
    }
    float re[LANES], im[LANES];
    #pragma unroll
    for (int l = 0; l < LANES; ++l) {
        size_t at = FFT_SPECTRUM(f + l, p, P);
        re[l] = l < lanes ? s[at] : 0.0f;
        im[l] = l < lanes ? s[at + FFT_BLOCK] : 0.0f;
    }
    return cx(VLOAD(re), VLOAD(im));
}

/* Stores as load_spectrum reads; whole blocks with non-temporal stores where ``stream``. */
FFT_INLINE void store_spectrum(__global float *s, int f, int p, int P, int lanes, vcplx z,
                               const int stream)
{
    if (lanes == LANES) {
        __global float *re = s + FFT_SPECTRUM(f, p, P);
        if (stream) {
            VSTREAM(z.re, re);
            VSTREAM(z.im, re + FFT_BLOCK);
        } else {
            VSTORE(z.re, re);
            VSTORE(z.im, re + FFT_BLOCK);
        }
        return;
    }
    float re[LANES], im[LANES];
    VSTORE(z.re, re);
    VSTORE(z.im, im);
    for (int l = 0; l < lanes; ++l) {
        size_t at = FFT_SPECTRUM(f + l, p, P);
        s[at] = re[l];
        s[at + FFT_BLOCK] = im[l];
    }
}

/* Z[k] = E + i O of the inverse's real split, E = X[k] + conj X[M - k],
 * O = (X[k] - conj X[M - k]) W^-k, conjugated for the forward transform that inverts it;
 * xm is X[M - k], w is W^k. */
FFT_INLINE vcplx inverse_split(vcplx xk, vcplx xm, float2 w)
{
    vcplx xc = conjugate(xm);
    vcplx e = cadd(xk, xc), o = ctwiddle(csub(xk, xc), (float2)(w.x, -w.y));
    return conjugate(cx(e.re - o.im, e.im + o.re));
}

/* }}} */

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void fft2d_forward(__global const float *tensor, const int tensor_offset,
                   __global float *spectra, const int spectra_offset,
                   __global const fft_planes *planes, __global const fft_plan *plans,
                   __global const float2 *twiddles, const int Fp
#if USE_LOCAL
                   , __local vcplx *tmp
#endif
                   )
{
    const int M = plans[0].n, FW = plans[1].n, KH = M + 1;
    const int KB = CS_DIV_UP(KH, LANES), WB = CS_DIV_UP(FW, LANES);
    __global const float2 *post = twiddles + plans[0].post;
    int coord[6];
    plane_coords(planes, get_group_id(0), coord);
    __global float *spectrum = spectra + spectra_offset;
    const int p = spectrum_plane(planes, coord), P = planes->planes;
    const size_t start = tensor_offset + (size_t)coord[0] * planes->tensor[0]
                         + (size_t)coord[1] * planes->tensor[1];
    __global const float *plane = tensor + start;
    vcplx a[MAXLEN + 1], b[MAXLEN + 1];

    for (int wb = get_local_id(0); wb < WB; wb += WG) {
        int w0 = wb * LANES, any = 0;
        fft_block blk;
        blk.how = lane_columns(planes, coord, w0, FW, blk.col, &blk.shift, &blk.mask);
        blk.start = start;
        #pragma unroll
        for (int l = 0; l < LANES; ++l)
            any |= blk.col[l] >= 0;
        vcplx *x = a;
        if (!any) {
            for (int k = 0; k <= M; ++k)
                a[k] = cx(0.0f, 0.0f);
        } else {
            for (int j = 0; j < M; ++j)
                a[j] = cx(load_row(plane, planes, coord, 2 * j, &blk),
                          load_row(plane, planes, coord, 2 * j + 1, &blk));
            vcplx *z = fft_run(a, b, &plans[0], twiddles);
            x = z == a ? b : a;
            /* X[k] = (E + W^k O) with E, O the transforms of the even and odd rows */
            for (int k = 0; k <= M; ++k) {
                vcplx zk = z[k == M ? 0 : k], zc = conjugate(z[k == 0 ? 0 : M - k]);
                vcplx e = cadd(zk, zc), o = times_minus_i(csub(zk, zc));
                x[k] = cscale(cadd(e, ctwiddle(o, post[k])), 0.5f);
            }
        }
        for (int kb = 0; kb < KB; ++kb) {
            vcplx v[LANES];
            #pragma unroll
            for (int l = 0; l < LANES; ++l)
                v[l] = kb * LANES + l < KH ? x[kb * LANES + l] : cx(0.0f, 0.0f);
            transpose_complex(v);
#if USE_LOCAL
            for (int l = 0; l < LANES && w0 + l < FW; ++l)
                tmp[kb * FW + w0 + l] = v[l];
#else
            const int lanes = min(LANES, KH - kb * LANES);
            for (int l = 0; l < LANES && w0 + l < FW; ++l)
                store_spectrum(spectrum, kb * LANES * FW + (w0 + l) * lanes, p, P, lanes, v[l],
                               0);
#endif
        }
    }
    barrier(USE_LOCAL ? CLK_LOCAL_MEM_FENCE : CLK_GLOBAL_MEM_FENCE);

    for (int kb = get_local_id(0); kb < KB; kb += WG) {
        int k0 = kb * LANES, lanes = min(LANES, KH - k0);
        for (int w = 0; w < FW; ++w)
#if USE_LOCAL
            a[w] = tmp[kb * FW + w];
#else
            a[w] = load_spectrum(spectrum, k0 * FW + w * lanes, p, P, lanes);
#endif
        vcplx *y = fft_run(a, b, &plans[1], twiddles);
        for (int kw = 0; kw < FW; ++kw)
            store_spectrum(spectrum, k0 * FW + kw * lanes, p, P, lanes, y[kw], 1);
    }
    for (int f = KH * FW + get_local_id(0); f < Fp; f += WG) {
        size_t at = FFT_SPECTRUM(f, p, P);
        spectrum[at] = spectrum[at + FFT_BLOCK] = 0.0f;
    }
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void fft2d_inverse(__global float *spectra, const int spectra_offset,
                   __global float *tensor, const int tensor_offset,
                   __global const fft_planes *planes, __global const fft_plan *plans,
                   __global const float2 *twiddles, const int Fp, const float scale
#if USE_LOCAL
                   , __local vcplx *tmp
#endif
                   )
{
    const int M = plans[0].n, FW = plans[1].n, KH = M + 1;
    const int KB = CS_DIV_UP(KH, LANES), WB = CS_DIV_UP(FW, LANES);
    __global const float2 *post = twiddles + plans[0].post;
    int coord[6];
    plane_coords(planes, get_group_id(0), coord);
    __global float *spectrum = spectra + spectra_offset;
    const int p = spectrum_plane(planes, coord), P = planes->planes;
    vcplx a[MAXLEN + 1], b[MAXLEN + 1];

    for (int kb = get_local_id(0); kb < KB; kb += WG) {
        int k0 = kb * LANES, lanes = min(LANES, KH - k0);
        for (int kw = 0; kw < FW; ++kw)
            a[kw] = conjugate(load_spectrum(spectrum, k0 * FW + kw * lanes, p, P, lanes));
        vcplx *y = fft_run(a, b, &plans[1], twiddles);
#if !USE_LOCAL
        for (int w = 0; w < FW; ++w)
            store_spectrum(spectrum, k0 * FW + w * lanes, p, P, lanes, conjugate(y[w]), 0);
#else
        for (int wb = 0; wb < WB; ++wb) {
            vcplx v[LANES];
            #pragma unroll
            for (int l = 0; l < LANES; ++l)
                v[l] = wb * LANES + l < FW ? conjugate(y[wb * LANES + l]) : cx(0.0f, 0.0f);
            transpose_complex(v);
            for (int l = 0; l < lanes; ++l)
                tmp[(k0 + l) * WB + wb] = v[l];
        }
#endif
    }
    barrier(USE_LOCAL ? CLK_LOCAL_MEM_FENCE : CLK_GLOBAL_MEM_FENCE);

    __global float *plane = tensor + tensor_offset + (size_t)coord[0] * planes->tensor[0]
                                   + (size_t)coord[1] * planes->tensor[1];
    for (int wb = get_local_id(0); wb < WB; wb += WG) {
        int w0 = wb * LANES, any = 0;
        fft_block blk;
        blk.how = lane_columns(planes, coord, w0, FW, blk.col, &blk.shift, &blk.mask);
        #pragma unroll
        for (int l = 0; l < LANES; ++l)
            any |= blk.col[l] >= 0;
        if (!any)
            continue;
#if USE_LOCAL
        for (int k = 0; k < M; ++k)
            a[k] = inverse_split(tmp[k * WB + wb], tmp[(M - k) * WB + wb], post[k]);
#else
        /* the block's columns of every row kh, transposed from the slots (kb, w0 + l) */
        for (int kb = 0; kb < KB; ++kb) {
            int k0 = kb * LANES, lanes = min(LANES, KH - k0);
            vcplx v[LANES];
            #pragma unroll
            for (int l = 0; l < LANES; ++l)
                v[l] = w0 + l < FW ? load_spectrum(spectrum, k0 * FW + (w0 + l) * lanes, p, P,
                                                   lanes)
                                   : cx(0.0f, 0.0f);
            transpose_complex(v);
            for (int l = 0; l < lanes; ++l)
                b[k0 + l] = v[l];
        }
        for (int k = 0; k < M; ++k)
            a[k] = inverse_split(b[k], b[M - k], post[k]);
#endif
        vcplx *z = fft_run(a, b, &plans[0], twiddles);
        for (int j = 0; j < M; ++j) {
            store_row(plane, planes, coord, 2 * j, &blk, z[j].re * scale);
            store_row(plane, planes, coord, 2 * j + 1, &blk, -z[j].im * scale);
        }
    }
}
