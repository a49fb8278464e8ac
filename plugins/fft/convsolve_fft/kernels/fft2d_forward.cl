/* fft2d_forward.cl: batched 2-D real-to-complex FFTs of tensor planes into spectra (the planes,
 * spectra and frequency order: fft_common.cl, "what the fft2d kernels share").
 *
 *   fft2d_forward(tensor, tensor_offset, spectra, spectra_offset, planes, plans, twiddles, Fp
 *                 [, tmp with USE_LOCAL])
 * (offsets in floats: where the chunk's tensor and the spectra start); one work-group of WG
 * work-items per plane.
 *
 * Per plane:
 *   pass 1 (per block of LANES columns): rows 2j and 2j + 1 as the real and imaginary part of
 *     a FH / 2 point complex transform along h, split into the KH frequencies of the real rows;
 *     blocks of LANES frequencies are transposed (lanes: columns -> frequencies kh) into tmp
 *     (or the spectrum's slots).
 *   pass 2 (per block of LANES frequencies kh): FW point complex transforms along w, stored.
 * A column block the descriptor leaves empty skips its pass-1 transform.
 *
 * Defines read: LANES, MAXLEN, STREAM, WG, USE_LOCAL (fft_common.cl).
 */
#include "convsolve.h"
#include "fft_common.cl"

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
