/* dft_small_inverse.cl: planes back from spectra at a small support (filter gradients), by
 * separable DFTs rather than FFTs: dft_small_forward.cl's products the other way, at the support
 * only,
 *   S[kh][j] = sum_f=(kh, kw) X[f] conj(ew[kw][j]),  v[i][j] = scale * sum_kh c_kh Re(S[kh][j]
 *   conj(eh[kh][i])), c_kh = 1 for kh = 0 and FH / 2, else 2 (the other half of the spectrum).
 *
 *   dft_small_inverse(spectra, spectra_offset, tensor, tensor_offset, planes, count, eh, ew,
 *                     order, KH, FW, Fp, scale)
 * Arguments and launch as dft_small_forward's.
 *
 * Defines read: LANES, MAXTAPS, WG (fft_common.cl).
 */
#include "convsolve.h"
#include "fft_common.cl"

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void dft_small_inverse(__global const float *spectra, const int spectra_offset,
                                __global float *tensor, const int tensor_offset,
                                __global const fft_planes *planes, const int count,
                                __global const float2 *eh, __global const float2 *ew,
                                __global const int2 *order, const int KH, const int FW,
                                const int Fp, const float scale)
{
    const int taps_h = planes->rows.hi, taps_w = planes->cols.hi, width = planes->cols.size;
    const int P = planes->planes;
    __global const float *in = spectra + spectra_offset;
    __global float *dst = tensor + tensor_offset;
    for (int p0 = get_global_id(0) * LANES; p0 < count; p0 += get_global_size(0) * LANES) {
    dft_lane lane[LANES];
    dft_lanes(planes, p0, count, taps_h, taps_w, lane);

    vcplx s[DFT_MAXKH][MAXTAPS];
    for (int kh = 0; kh < KH; ++kh)
        for (int j = 0; j < taps_w; ++j)
            s[kh][j] = cx(0.0f, 0.0f);
    for (int f0 = 0; f0 < Fp; f0 += LANES) {
        vcplx x[LANES];
        #pragma unroll
        for (int l = 0; l < LANES; ++l) {
            __global const float *re = in + FFT_SPECTRUM(f0, lane[l].spectrum, P);
            x[l] = cx(VLOAD(re), VLOAD(re + FFT_BLOCK));
        }
        transpose_complex(x);   /* x[q]: frequency f0 + q of the LANES planes */
        #pragma unroll
        for (int q = 0; q < LANES; ++q) {
            int2 at = order[f0 + q];
            if (at.x < 0)
                continue;
            int kh = at.x, kw = at.y;
            for (int j = 0; j < taps_w; ++j) {
                float2 e = ew[kw * MAXTAPS + j];
                s[kh][j] = cmad(x[q], (float2)(e.x, -e.y), s[kh][j]);
            }
        }
    }

    for (int i = 0; i < taps_h; ++i)
        for (int j = 0; j < taps_w; ++j) {
            vreal v = (vreal)0.0f;
            for (int kh = 0; kh < KH; ++kh) {
                float2 e = eh[kh * MAXTAPS + i];
                float c = kh == 0 || kh == KH - 1 ? scale : 2.0f * scale;
                v = fma(s[kh][j].re, (vreal)(c * e.x), fma(s[kh][j].im, (vreal)(c * e.y), v));
            }
            float g[LANES];
            VSTORE(v, g);
            #pragma unroll
            for (int l = 0; l < LANES; ++l) {
                int r = lane[l].row[i], c = lane[l].col[j];
                if (lane[l].valid && r >= 0 && c >= 0)
                    dst[lane[l].base + r * width + c] = g[l];
            }
        }
    }
}
