/* fft_common.cl: what the FFT kernels share: lane vectors, complex arithmetic, the radix 2, 3,
 * 4, 5 and 7 butterflies, mixed-radix Stockham passes over private buffers, lane transposes, the
 * descriptors that map planes of a tensor onto transform positions, the fft2d kernels' row and
 * spectrum loads and stores, and the dft_small kernels' lanes. Each kernel's file includes it
 * after convsolve.h.
 *
 * Lanes: a work-item computes LANES independent 1-D transforms at once, one per lane of a
 * `vreal` vector (float16 for LANES == 16, the AVX-512 width; float for LANES == 1, the GPU
 * shape, where the lanes are the work-items of a group instead).
 *
 * A 1-D transform of length n follows its plan (fft_plan, built on the host): stage s has radix
 * radix[s] and twiddles tw[twiddle[s] + (t - 1) * ns + k] = exp(-2 pi i t k / (ns * radix[s]))
 * for t < radix[s], k < ns, where ns is the product of the earlier radices (Stockham autosort:
 * natural order in, natural order out). The host computes every twiddle in double.
 *
 * Defines read (each with a default here): LANES, MAXLEN, STREAM, WG, USE_LOCAL (fft2d),
 * MAXTAPS (dft_small).
 */
#ifndef FFT_COMMON_CL
#define FFT_COMMON_CL

#ifndef LANES
#define LANES 16    /* transforms a work-item runs side by side, one a lane (1, 2, 4, 8, 16) */
#endif
#ifndef STREAM
#define STREAM 1    /* spectra written with non-temporal stores (no read for ownership) */
#endif
#ifndef MAXLEN
#define MAXLEN 256  /* longest 1-D transform the private buffers hold (a capacity, not a tunable) */
#endif
#define FFT_MAX_STAGES 16
/* PoCL calls plain inline helpers out of line: butterflies must be inlined to stay in registers */
#define FFT_INLINE inline __attribute__((always_inline))

#define FFT_CAT2(a, b) a##b
#define FFT_CAT(a, b) FFT_CAT2(a, b)

#if LANES == 1
typedef float vreal;
typedef int vint;
#define VLOAD(p) (*(p))
#define VSTORE(v, p) (*(p) = (v))
#elif LANES == 2 || LANES == 4 || LANES == 8 || LANES == 16
typedef FFT_CAT(float, LANES) vreal;
typedef FFT_CAT(int, LANES) vint;
#define VLOAD(p) FFT_CAT(vload, LANES)(0, p)
#define VSTORE(v, p) FFT_CAT(vstore, LANES)(v, 0, p)
#else
#error "LANES must be 1, 2, 4, 8 or 16"
#endif

/* An aligned vector store that bypasses the caches where the compiler can say so (clang). */
#if STREAM && defined(__clang__) && LANES > 1
#define VSTREAM(v, p) __builtin_nontemporal_store(v, (__global vreal *)(p))
#else
#define VSTREAM(v, p) VSTORE(v, p)
#endif

/* LANES complex numbers: lane l of re and im is the l-th transform's value. */
typedef struct { vreal re, im; } vcplx;

/* One 1-D transform: its length, its stages' radices and where their twiddles start; post is
 * where exp(-2 pi i k / (2 n)), k <= n, starts (the real-input split of a half-length plan). */
typedef struct { int n, stages, post, radix[FFT_MAX_STAGES], twiddle[FFT_MAX_STAGES]; } fft_plan;

/* How transform positions p along one axis map onto a tensor axis, for tile t and phase a:
 * q = (t * tile + p + base) * mul + a * step + off; the position holds tensor element i = q / div
 * when lo <= p < hi, q >= 0, q % div == 0 and i < size; elsewhere it is zero (or not written). */
typedef struct { int lo, hi, tile, base, mul, step, off, div, size; } fft_axis;

/* A set of planes: plane index = ((((i0 * n1 + i1) * n2 + a_h) * n3 + a_w) * n4 + t_h) * n5 + t_w
 * (extents count[]); the tensor plane starts at i0 * tensor[0] + i1 * tensor[1] and holds
 * rows.size x cols.size elements; its spectrum is plane sum(coord[d] * spectrum[d]) of a matrix
 * of `planes` spectra (see FFT_SPECTRUM). The tensor buffer holds `extent` elements. */
typedef struct {
    int count[6], tensor[2], spectrum[6], planes, extent;
    fft_axis rows, cols;
} fft_planes;

/* Spectra are stored by blocks of FFT_BLOCK frequencies: block b of every plane of a matrix of P
 * planes, then block b + 1. Plane p's frequency f is float FFT_SPECTRUM(f, p, P) (its real part;
 * the imaginary part follows FFT_BLOCK floats later), so one block of a whole matrix is a
 * contiguous slab (the products read it as such). */
#define FFT_BLOCK 16
#define FFT_SPECTRUM(f, p, P) \
    ((((size_t)((f) / FFT_BLOCK) * (P) + (p)) * 2 + 0) * FFT_BLOCK + (f) % FFT_BLOCK)

FFT_INLINE vcplx cx(vreal re, vreal im) { vcplx z; z.re = re; z.im = im; return z; }
FFT_INLINE vcplx cadd(vcplx a, vcplx b) { return cx(a.re + b.re, a.im + b.im); }
FFT_INLINE vcplx csub(vcplx a, vcplx b) { return cx(a.re - b.re, a.im - b.im); }
FFT_INLINE vcplx conjugate(vcplx a) { return cx(a.re, -a.im); }
FFT_INLINE vcplx times_minus_i(vcplx a) { return cx(a.im, -a.re); }
FFT_INLINE vcplx cscale(vcplx a, float s) { return cx(a.re * s, a.im * s); }
/* a * w for a twiddle w = (cos, sin), the same in every lane. (fma, an OpenCL builtin on vreal,
 * also makes clang mark kernels as using 512-bit vectors: without such a call PoCL's
 * skylake-avx512 code splits float16 arithmetic into 256-bit halves.) */
FFT_INLINE vcplx ctwiddle(vcplx a, float2 w)
{
    return cx(fma(a.re, (vreal)w.x, -a.im * w.y), fma(a.re, (vreal)w.y, a.im * w.x));
}

/* s + a * w */
FFT_INLINE vcplx cmad(vcplx a, float2 w, vcplx s)
{
    return cx(fma(a.re, (vreal)w.x, fma(-a.im, (vreal)w.y, s.re)),
              fma(a.re, (vreal)w.y, fma(a.im, (vreal)w.x, s.im)));
}

/* {{{ butterflies: v[0..R) <- DFT_R(v), exponent sign -1 */

FFT_INLINE void dft2(vcplx *v)
{
    vcplx a = v[0];
    v[0] = cadd(a, v[1]);
    v[1] = csub(a, v[1]);
}

FFT_INLINE void dft4(vcplx *v)
{
    vcplx t0 = cadd(v[0], v[2]), t1 = csub(v[0], v[2]);
    vcplx t2 = cadd(v[1], v[3]), t3 = times_minus_i(csub(v[1], v[3]));
    v[0] = cadd(t0, t2);
    v[2] = csub(t0, t2);
    v[1] = cadd(t1, t3);
    v[3] = csub(t1, t3);
}

/* Odd radix R = 2h + 1: with t_k = v_k + v_{R-k}, u_k = v_k - v_{R-k} (k = 1..h),
 * y_m = v_0 + sum_k cos(2 pi k m / R) t_k -/+ i sum_k sin(2 pi k m / R) u_k for y_m, y_{R-m}. */
__constant float FFT_COS3[1][1] = {{-0.5f}};
__constant float FFT_SIN3[1][1] = {{0.866025403784f}};
__constant float FFT_COS5[2][2] = {{0.309016994375f, -0.809016994375f},
                                   {-0.809016994375f, 0.309016994375f}};
__constant float FFT_SIN5[2][2] = {{0.951056516295f, 0.587785252292f},
                                   {0.587785252292f, -0.951056516295f}};
__constant float FFT_COS7[3][3] = {{0.623489801859f, -0.222520933956f, -0.900968867902f},
                                   {-0.222520933956f, -0.900968867902f, 0.623489801859f},
                                   {-0.900968867902f, 0.623489801859f, -0.222520933956f}};
__constant float FFT_SIN7[3][3] = {{0.781831482468f, 0.974927912182f, 0.433883739118f},
                                   {0.974927912182f, -0.433883739118f, -0.781831482468f},
                                   {0.433883739118f, -0.781831482468f, 0.974927912182f}};

#define FFT_DEFINE_ODD_DFT(R, H)                                                            \
FFT_INLINE void dft##R(vcplx *v)                                                                \
{                                                                                           \
    vcplx t[H], u[H], y0 = v[0];                                                            \
    _Pragma("unroll")                                                                       \
    for (int k = 0; k < H; ++k) {                                                           \
        t[k] = cadd(v[k + 1], v[R - 1 - k]);                                                \
        u[k] = csub(v[k + 1], v[R - 1 - k]);                                                \
        y0 = cadd(y0, t[k]);                                                                \
    }                                                                                       \
    _Pragma("unroll")                                                                       \
    for (int m = 0; m < H; ++m) {                                                           \
        vcplx b = v[0], e = cx(0.0f, 0.0f);                                                 \
        _Pragma("unroll")                                                                   \
        for (int k = 0; k < H; ++k) {                                                       \
            b = cadd(b, cscale(t[k], FFT_COS##R[m][k]));                                    \
            e = cadd(e, cscale(u[k], FFT_SIN##R[m][k]));                                    \
        }                                                                                   \
        e = times_minus_i(e);                                                               \
        v[m + 1] = cadd(b, e);                                                              \
        v[R - 1 - m] = csub(b, e);                                                          \
    }                                                                                       \
    v[0] = y0;                                                                              \
}
FFT_DEFINE_ODD_DFT(3, 1)
FFT_DEFINE_ODD_DFT(5, 2)
FFT_DEFINE_ODD_DFT(7, 3)

/* }}} */

/* {{{ Stockham passes */

/* One radix-R stage of a length R * m transform: butterfly j = j0 + k (k < ns) reads in[j + t * m],
 * twiddles, and writes out[j0 * R + k + t * ns]. */
#define FFT_DEFINE_STAGE(R)                                                                 \
FFT_INLINE void fft_stage##R(const vcplx *in, vcplx *out, int m, int ns,                   \
                             __global const float2 *tw)                                     \
{                                                                                           \
    for (int j0 = 0; j0 < m; j0 += ns) {                                                    \
        for (int k = 0; k < ns; ++k) {                                                      \
            vcplx v[R];                                                                     \
            _Pragma("unroll")                                                               \
            for (int t = 0; t < R; ++t)                                                     \
                v[t] = in[j0 + k + t * m];                                                  \
            if (ns > 1) {                                                                   \
                _Pragma("unroll")                                                           \
                for (int t = 1; t < R; ++t)                                                 \
                    v[t] = ctwiddle(v[t], tw[(t - 1) * ns + k]);                            \
            }                                                                               \
            dft##R(v);                                                                      \
            _Pragma("unroll")                                                               \
            for (int t = 0; t < R; ++t)                                                     \
                out[j0 * R + k + t * ns] = v[t];                                            \
        }                                                                                   \
    }                                                                                       \
}
FFT_DEFINE_STAGE(2)
FFT_DEFINE_STAGE(3)
FFT_DEFINE_STAGE(4)
FFT_DEFINE_STAGE(5)
FFT_DEFINE_STAGE(7)

/* The forward transform of x (plan->n points) by the plan's stages, ping-ponging with y; returns
 * the buffer that holds the result (x or y). Called, not inlined: one copy of the stages per
 * kernel keeps the build short. */
__attribute__((noinline)) vcplx *fft_run(vcplx *x, vcplx *y, __global const fft_plan *plan,
                      __global const float2 *twiddles)
{
    int n = plan->n, ns = 1;
    for (int s = 0; s < plan->stages; ++s) {
        int radix = plan->radix[s];
        __global const float2 *tw = twiddles + plan->twiddle[s];
        switch (radix) {
        case 2: fft_stage2(x, y, n / 2, ns, tw); break;
        case 3: fft_stage3(x, y, n / 3, ns, tw); break;
        case 4: fft_stage4(x, y, n / 4, ns, tw); break;
        case 5: fft_stage5(x, y, n / 5, ns, tw); break;
        default: fft_stage7(x, y, n / 7, ns, tw); break;
        }
        vcplx *swap = x;
        x = y;
        y = swap;
        ns *= radix;
    }
    return x;
}

/* }}} */

/* {{{ lane transposes: v[i] lane l <-> v[l] lane i, for LANES x LANES blocks */

#if LANES > 1
#if defined(__clang__)
/* Swap the off-diagonal s-blocks of rows i and i + s: lanes with bit s set take the other row. */
#define FFT_SWAP_BLOCKS(a, b, LO, HI)                                                      \
    do {                                                                                    \
        vreal lo_ = __builtin_shufflevector(a, b, LO), hi_ = __builtin_shufflevector(a, b, HI); \
        a = lo_;                                                                            \
        b = hi_;                                                                            \
    } while (0)
#if LANES == 16
#define FFT_LO1 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30
#define FFT_HI1 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31
#define FFT_LO2 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29
#define FFT_HI2 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31
#define FFT_LO4 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27
#define FFT_HI4 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31
#define FFT_LO8 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23
#define FFT_HI8 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31
#elif LANES == 8
#define FFT_LO1 0, 8, 2, 10, 4, 12, 6, 14
#define FFT_HI1 1, 9, 3, 11, 5, 13, 7, 15
#define FFT_LO2 0, 1, 8, 9, 4, 5, 12, 13
#define FFT_HI2 2, 3, 10, 11, 6, 7, 14, 15
#define FFT_LO4 0, 1, 2, 3, 8, 9, 10, 11
#define FFT_HI4 4, 5, 6, 7, 12, 13, 14, 15
#elif LANES == 4
#define FFT_LO1 0, 4, 2, 6
#define FFT_HI1 1, 5, 3, 7
#define FFT_LO2 0, 1, 4, 5
#define FFT_HI2 2, 3, 6, 7
#else
#define FFT_LO1 0, 2
#define FFT_HI1 1, 3
#endif
FFT_INLINE void transpose_lanes(vreal *v)
{
    #pragma unroll
    for (int i = 0; i < LANES; i += 2)
        FFT_SWAP_BLOCKS(v[i], v[i + 1], FFT_LO1, FFT_HI1);
#if LANES >= 4
    #pragma unroll
    for (int i = 0; i < LANES; i += 4)
        for (int j = i; j < i + 2; ++j)
            FFT_SWAP_BLOCKS(v[j], v[j + 2], FFT_LO2, FFT_HI2);
#endif
#if LANES >= 8
    #pragma unroll
    for (int i = 0; i < LANES; i += 8)
        for (int j = i; j < i + 4; ++j)
            FFT_SWAP_BLOCKS(v[j], v[j + 4], FFT_LO4, FFT_HI4);
#endif
#if LANES >= 16
    for (int j = 0; j < 8; ++j)
        FFT_SWAP_BLOCKS(v[j], v[j + 8], FFT_LO8, FFT_HI8);
#endif
}
#else
/* Compilers without clang's shuffle builtin: through a private array. */
FFT_INLINE void transpose_lanes(vreal *v)
{
    float a[LANES * LANES], b[LANES];
    #pragma unroll
    for (int i = 0; i < LANES; ++i)
        VSTORE(v[i], a + i * LANES);
    #pragma unroll
    for (int l = 0; l < LANES; ++l) {
        #pragma unroll
        for (int i = 0; i < LANES; ++i)
            b[i] = a[i * LANES + l];
        v[l] = VLOAD(b);
    }
}
#endif
#else
FFT_INLINE void transpose_lanes(vreal *v) {}
#endif

FFT_INLINE void transpose_complex(vcplx *v)
{
    vreal re[LANES], im[LANES];
    #pragma unroll
    for (int i = 0; i < LANES; ++i) {
        re[i] = v[i].re;
        im[i] = v[i].im;
    }
    transpose_lanes(re);
    transpose_lanes(im);
    #pragma unroll
    for (int i = 0; i < LANES; ++i)
        v[i] = cx(re[i], im[i]);
}

/* }}} */

/* {{{ plane descriptors */

/* The tensor index of transform position p on an axis (tile t, phase a), or -1 for a zero. */
FFT_INLINE int axis_index(__global const fft_axis *x, int p, int t, int a)
{
    if (p < x->lo || p >= x->hi)
        return -1;
    int q = (t * x->tile + p + x->base) * x->mul + a * x->step + x->off;
    if (q < 0)
        return -1;
    if (x->div > 1) {   /* dilated filters only: an integer division is dear */
        if (q % x->div)
            return -1;
        q /= x->div;
    }
    return q < x->size ? q : -1;
}

/* The coordinates (i0, i1, a_h, a_w, t_h, t_w) of plane `plane`. */
FFT_INLINE void plane_coords(__global const fft_planes *d, int plane, int *coord)
{
    for (int i = 5; i >= 0; --i) {
        coord[i] = plane % d->count[i];
        plane /= d->count[i];
    }
}

/* The spectrum plane (of its matrix) of the plane at coord. */
FFT_INLINE int spectrum_plane(__global const fft_planes *d, const int *coord)
{
    int plane = 0;
    for (int i = 0; i < 6; ++i)
        plane += coord[i] * d->spectrum[i];
    return plane;
}

/* How the lanes of a block of columns meet a tensor row. */
#define FFT_GATHER 0        /* scattered columns: lane by lane */
#define FFT_CONTIGUOUS 1    /* LANES consecutive columns, all present: one vector load or store */
#define FFT_MASKED 2        /* present lanes l read column shift + l: a vector load, masked */

/* Column indices of lanes w0..w0+LANES-1 (-1: zero or not written), and how they lie (FFT_*;
 * FFT_MASKED sets *shift and *mask, all ones in present lanes). */
FFT_INLINE int lane_columns(__global const fft_planes *d, const int *coord, int w0, int width,
                            int *col, int *shift, vint *mask)
{
    int contiguous = 1, affine = 1, first = -1;
    int m[LANES];
    #pragma unroll
    for (int l = 0; l < LANES; ++l) {
        col[l] = w0 + l < width ? axis_index(&d->cols, w0 + l, coord[5], coord[3]) : -1;
        contiguous &= col[l] >= 0 && col[l] == col[0] + l;
        if (col[l] >= 0 && first < 0)
            first = l;
        affine &= col[l] < 0 || col[l] - l == col[first] - first;
        m[l] = col[l] >= 0 ? -1 : 0;
    }
#if LANES == 1
    *mask = m[0];
#else
    *mask = FFT_CAT(vload, LANES)(0, m);
#endif
    *shift = first < 0 ? 0 : col[first] - first;
    return contiguous ? FFT_CONTIGUOUS : affine ? FFT_MASKED : FFT_GATHER;
}

/* }}} */

/* {{{ what the fft2d kernels share (fft2d_forward.cl, fft2d_inverse.cl)
 *
 * A plane is FH x FW transform positions (FH even) filled from a tensor through a plane
 * descriptor (which tensor elements, zero elsewhere: padding, dilation gaps, polyphase and tile
 * windows). Its spectrum has KH = FH / 2 + 1 rows of frequencies along h (the other half
 * follows from the input being real) and FW along w, F = KH * FW in all, stored as frequencies
 * f < Fp (FFT_SPECTRUM's blocks; Fp a multiple of FFT_BLOCK, f >= F are zeros). Frequency
 * (kh, kw) is f = k0 * FW + kw * n + (kh - k0) where k0 = kh - kh % LANES starts its block of
 * n = min(LANES, KH - k0) rows: a work-item's LANES lanes are LANES consecutive f.
 *
 * One work-group per plane (global size = planes * WG, local size = WG); plans[0] is the
 * complex plan of length FH / 2, plans[1] that of length FW. Between its two passes a kernel
 * keeps the plane in tmp, local memory of max(KB * FW, KB * LANES * WB) vcplx (KB =
 * ceil(KH / LANES), WB = ceil(FW / LANES)) (USE_LOCAL 1), or, for planes larger than the
 * device's local memory (USE_LOCAL 0), in the plane's own spectrum: entry (kb, w), the LANES
 * rows of block kb at column w, at the frequencies k0 * FW + w * n of block kb (the slots the
 * forward's second pass reads and writes; the inverse overwrites its input spectra, their last
 * use), the passes separated by a global-memory barrier. */

#ifndef WG
#define WG 1    /* work-items per work-group: fft2d's per plane (CPUs 1, GPUs enough to fill the
                   lanes); dft_small's, each taking LANES planes */
#endif
#ifndef USE_LOCAL
#define USE_LOCAL 1 /* the fft2d kernels' plane between the passes: 1 in local memory, 0 in its
                       spectrum */
#endif

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

/* {{{ what the dft_small kernels share (dft_small_forward.cl, dft_small_inverse.cl)
 *
 * Lanes are planes: a work-item takes LANES consecutive planes of a set at a time, so that
 * after a LANES x LANES transpose each lane's block of LANES frequencies is one aligned vector
 * of FFT_SPECTRUM's layout (consecutive planes of the W[k][c'] layout: one contiguous stretch). */

#ifndef MAXTAPS
#define MAXTAPS 8   /* largest support (taps) per axis these kernels take (a capacity) */
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

/* }}} */

#endif /* FFT_COMMON_CL */
