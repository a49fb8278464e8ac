/* dft_small_forward.cl: spectra of planes with a small support (filters) by separable DFTs
 * rather than FFTs.
 *
 * A weight plane holds at most taps_h x taps_w nonzero positions (its descriptor's row and
 * column windows, lo = 0, hi = taps), so its FH x FW spectrum (the fft2d kernels' layout and
 * frequency order, fft_common.cl) is two small products:
 *   T[kh][j] = sum_i v[i][j] eh[kh][i],      W[f] = sum_j T[kh(f)][j] ew[kw(f)][j]
 * with eh[kh][i] = exp(-2 pi i kh i / FH), ew[kw][j] = exp(-2 pi i kw j / FW) (host, double),
 * and order[f] = (kh, kw) for f < F ((-1, -1) for f >= F: zeros). Cheaper than a whole-plane FFT
 * when the support is small, and no transposes between passes. Lanes are planes (fft_common.cl,
 * "what the dft_small kernels share").
 *
 *   dft_small_forward(tensor, tensor_offset, spectra, spectra_offset, planes, count, eh, ew,
 *                     order, KH, FW, Fp)
 * `count` is the number of planes of the set; eh is KH x MAXTAPS, ew FW x MAXTAPS. Local size
 * WG, any global size: a work-item takes LANES planes, then the LANES planes a global size
 * further on, and so on, so a capped launch has few work-groups.
 *
 * Defines read: LANES, STREAM, MAXTAPS, WG (fft_common.cl).
 */
#include "convsolve.h"
#include "fft_common.cl"

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void dft_small_forward(__global const float *tensor, const int tensor_offset,
                                __global float *spectra, const int spectra_offset,
                                __global const fft_planes *planes, const int count,
                                __global const float2 *eh, __global const float2 *ew,
                                __global const int2 *order, const int KH, const int FW,
                                const int Fp)
{
    const int taps_h = planes->rows.hi, taps_w = planes->cols.hi, width = planes->cols.size;
    const int P = planes->planes;
    __global const float *src = tensor + tensor_offset;
    __global float *out = spectra + spectra_offset;
    for (int p0 = get_global_id(0) * LANES; p0 < count; p0 += get_global_size(0) * LANES) {
    dft_lane lane[LANES];
    dft_lanes(planes, p0, count, taps_h, taps_w, lane);

    vcplx t[DFT_MAXKH][MAXTAPS];
    for (int j = 0; j < taps_w; ++j) {
        vreal v[MAXTAPS];
        for (int i = 0; i < taps_h; ++i) {
            float g[LANES];
            #pragma unroll
            for (int l = 0; l < LANES; ++l) {
                int r = lane[l].row[i], c = lane[l].col[j];
                g[l] = lane[l].valid && r >= 0 && c >= 0 ? src[lane[l].base + r * width + c]
                                                        : 0.0f;
            }
            v[i] = VLOAD(g);
        }
        for (int kh = 0; kh < KH; ++kh)
            t[kh][j] = cx(0.0f, 0.0f);
        for (int i = 0; i < taps_h; ++i)     /* i outer: KH independent sums in flight */
            for (int kh = 0; kh < KH; ++kh) {
                float2 e = eh[kh * MAXTAPS + i];
                t[kh][j] = cx(fma(v[i], (vreal)e.x, t[kh][j].re),
                              fma(v[i], (vreal)e.y, t[kh][j].im));
            }
    }

    for (int f0 = 0; f0 < Fp; f0 += LANES) {
        /* j outer, frequencies inner: LANES independent sums in flight, not one chain */
        vcplx y[LANES];
        int2 at[LANES];
        #pragma unroll
        for (int q = 0; q < LANES; ++q) {
            at[q] = order[f0 + q];
            y[q] = cx(0.0f, 0.0f);
        }
        for (int j = 0; j < taps_w; ++j) {
            #pragma unroll
            for (int q = 0; q < LANES; ++q)
                if (at[q].x >= 0)
                    y[q] = cmad(t[at[q].x][j], ew[at[q].y * MAXTAPS + j], y[q]);
        }
        transpose_complex(y);   /* y[l]: LANES frequencies of plane p0 + l */
        #pragma unroll
        for (int l = 0; l < LANES; ++l)
            if (lane[l].valid) {
                __global float *re = out + FFT_SPECTRUM(f0, lane[l].spectrum, P);
                VSTREAM(y[l].re, re);
                VSTREAM(y[l].im, re + FFT_BLOCK);
            }
    }
    }
}
