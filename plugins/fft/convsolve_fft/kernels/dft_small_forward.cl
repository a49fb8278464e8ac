/* dft_small.cl: spectra of planes with a small support (filters), and planes back from spectra
 * at a small support (filter gradients), by separable DFTs rather than FFTs.
 *
 * A weight plane holds at most taps_h x taps_w nonzero positions (its descriptor's row and
 * column windows, lo = 0, hi = taps), so its FH x FW spectrum (fft2d.cl's layout and frequency
 * order) is two small products:
 *   T[kh][j] = sum_i v[i][j] eh[kh][i],      W[f] = sum_j T[kh(f)][j] ew[kw(f)][j]
 * with eh[kh][i] = exp(-2 pi i kh i / FH), ew[kw][j] = exp(-2 pi i kw j / FW) (host, double),
 * and order[f] = (kh, kw) for f < F ((-1, -1) for f >= F: zeros). Inverse, at the support only:
 *   S[kh][j] = sum_f=(kh, kw) X[f] conj(ew[kw][j]),  v[i][j] = scale * sum_kh c_kh Re(S[kh][j]
 *   conj(eh[kh][i])), c_kh = 1 for kh = 0 and FH / 2, else 2 (the other half of the spectrum).
 * Both are cheaper than a whole-plane FFT when the support is small, and need no transposes
 * between passes.
 *
 * Lanes are planes: a work-item takes LANES consecutive planes of a set at a time, so that
 * after a LANES x LANES transpose each lane's block of LANES frequencies is one aligned vector
 * of FFT_SPECTRUM's layout (consecutive planes of the W[k][c'] layout: one contiguous stretch).
 *
 * Kernels (local size = WG; any global size: a work-item takes LANES planes, then the LANES
 * planes a global size further on, and so on, so a capped launch has few work-groups):
 *   dft_small_forward(tensor, tensor_offset, spectra, spectra_offset, planes, count, eh, ew,
 *                     order, KH, FW, Fp)
 *   dft_small_inverse(spectra, spectra_offset, tensor, tensor_offset, planes, count, eh, ew,
 *                     order, KH, FW, Fp, scale)
 * `count` is the number of planes of the set; eh is KH x MAXTAPS, ew FW x MAXTAPS.
 *
 * Defines read: LANES, STREAM (fft_common.cl), MAXTAPS, WG.
 */
#include "convsolve.h"
#include "fft_common.cl"

#ifndef MAXTAPS
#define MAXTAPS 8   /* largest support (taps) per axis these kernels take (a capacity) */
#endif
#ifndef WG
#define WG 1        /* work-items per group (each takes LANES planes) */
#endif
#define DFT_MAXKH 48 /* longest half spectrum along h (FH <= 94) the private T holds */

/* Per lane: where its plane lies in the tensor and among the spectra, and the tensor index of
 * each support row and column (-1: zero or not written). */
typedef struct { size_t base; int row[MAXTAPS], col[MAXTAPS], valid, spectrum; } dft_lane;

FFT_INLINE void dft_lanes(__global const fft_planes *d, int first, int count, int taps_h,
                          int taps_w, dft_lane *lane)
{
    int coord[6];
    plane_coords(d, min(first, count - 1), coord);
    for (int l = 0; l < LANES; ++l) {
        lane[l].valid = first + l < count;
        int same = l > 0;   /* same phases and tiles as lane l - 1: same rows and columns */
        if (l > 0 && lane[l].valid)   /* the next plane: count up, innermost coordinate first */
            for (int i = 5; i >= 0 && ++coord[i] == d->count[i]; --i) {
                coord[i] = 0;
                same &= i < 2;
            }
        lane[l].base = (size_t)coord[0] * d->tensor[0] + (size_t)coord[1] * d->tensor[1];
        lane[l].spectrum = spectrum_plane(d, coord);
        for (int i = 0; i < taps_h; ++i)
            lane[l].row[i] = same ? lane[l - 1].row[i]
                                  : axis_index(&d->rows, i, coord[4], coord[2]);
        for (int j = 0; j < taps_w; ++j)
            lane[l].col[j] = same ? lane[l - 1].col[j]
                                  : axis_index(&d->cols, j, coord[5], coord[3]);
    }
}

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
