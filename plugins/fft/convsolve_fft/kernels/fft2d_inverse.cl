/* fft2d_inverse.cl: the real planes of batched 2-D spectra, written where a plane descriptor
 * places them (the planes, spectra and frequency order: fft_common.cl, "what the fft2d kernels
 * share").
 *
 *   fft2d_inverse(spectra, spectra_offset, tensor, tensor_offset, planes, plans, twiddles, Fp,
 *                 scale [, tmp with USE_LOCAL])
 * (offsets in floats: where the spectra and the chunk's tensor start); one work-group of WG
 * work-items per plane.
 *
 * fft2d_forward.cl's steps backwards (conjugate, forward transform, conjugate): pass 1 along w
 * per block of LANES frequency rows, pass 2 along h per block of LANES columns, the outputs
 * scaled by `scale` and written only where the descriptor places them (a crop window); column
 * blocks the descriptor leaves empty are skipped. With USE_LOCAL 0 the spectra are overwritten
 * (the plane between the passes).
 *
 * Defines read: LANES, MAXLEN, STREAM, WG, USE_LOCAL (fft_common.cl).
 */
#include "convsolve.h"
#include "fft_common.cl"

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
