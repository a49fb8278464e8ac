/* implicit_gemm_common.cl: a convolution read as a GEMM, C[m][p] = sum over j of A[m][j] *
 * B[j][p], in each of the three directions; shared by igemm_local.cl (GPUs) and igemm_vector.cl
 * (CPUs).
 *
 *   direction          C (m x p)                A (m x j)          B (j x p), gathered
 *   0 forward          y: k x (n, oh, ow)       w: k x (c, r, s)   x at the window of (oh, ow)
 *   1 backward data    dx of one stride phase:  w: c x (k, t, u)   dy rows i + off - t * dd
 *                      c x (n, i, ii)           (the phase's taps)
 *   2 backward weights dw: k x (c, r, s)        dy: k x (n,oh,ow)  x at the window of (oh, ow)
 *
 * In 3-D (and 1-D and 2-D alike: every problem is 3-D here, depth and height 1 below rank 3 and
 * 2, IG_CONV_PARAMS) the window and the output pixel have a depth too: forward's j is (c, z, r,
 * s) and p (n, od, oh, ow); backward weights' p is (c, z, r, s) and j (n, od, oh, ow).
 * All within one group g (channels per group: Cg = C / G, Kg = K / G).  Backward data skips the
 * zero-inserted positions of a strided convolution: the dx positions h = a + i * STRIDE_H of
 * phase a receive only the taps r = r0 + t * step whose (h + PAD_T - r * DIL_H) is a multiple of
 * the stride, from dy row i + off - t * dd (ig_phase), so each phase is a dense GEMM (as
 * MIOpen's and cuDNN's strided backward-data kernels decompose it).
 *
 * An IgGemm describes one slice z of a launch (forward and backward weights: group and split of
 * the reduction; backward data: group and phase) with p and j read as four digits each,
 * p = ((p0 * PD + pd) * P1 + p1) * P2 + p2 and j = ((j0 * JD + jd) * J1 + j1) * J2 + j2; where
 * B's tensor is channels-last, its channel digit goes innermost, so that consecutive j (forward:
 * c, backward data: k; IG_J_INNER) or, for backward weights, consecutive p (c; IG_P_INNER) are
 * consecutive elements of B: j = ((jd * J1 + j1) * J2 + j2) * J0 + j0, p likewise:
 *   A[m][j] = a[a_off + m * a_m + j0 * a_j0 + jd * a_jd + j1 * a_j1 + j2 * a_j2]
 *   B[j][p] = b[b_off + p0 * b_p0 + j0 * b_j0 + ((dep * BH + row) * BW + col) * b_pix], with
 *             dep = pd * d_p + jd * d_j + d_off, row = p1 * r_p + j1 * r_j + r_off and
 *             col = p2 * c_p + j2 * c_j + c_off; zero outside 0 <= dep < BD, 0 <= row < BH,
 *             0 <= col < BW (the padding, or dy's border); b_pix is 1 for a channels-first
 *             tensor, its channel count for a channels-last one
 *   C[m][p] = out[o_off + m * o_m + p0 * o_p0 + pd * o_pd + p1 * o_p1 + p2 * o_p2], channel
 *             o_chan + m of the output (its epilogue's k: convsolve_epilogue.h)
 * (b_size: the element count of B's tensor.)  Each tensor's layout sets its strides (ig_strides):
 * x (N, C, D, H, W) NCDHW or NDHWC, w (K, C/G, Z, R, S) KCZRS or KZRSC, y NCDHW or NDHWC, rank
 * 1 and 2 alike (NCW, NWC, NCHW, NHWC).
 * Every offset fits an int: each is an element of one tensor (core/problem.py's int32 rule) or
 * of the workspace (at most SPLITS partial dw or y, bounded by the solver's budget), or a window's
 * reaching into the padding (bounded by the solver's is_applicable, the pixel stride included).
 *
 * Non-finite semantics: forward and backward weights read the zero padding as zeros that take
 * part in the products (0 * inf = NaN, as convsolve.reference does); backward data has no such
 * products (dy positions past its border contribute nothing), so its kernels must never multiply
 * a weight by a zero that stands for "outside" when the weight is not finite.
 *
 * Kernels take the sizes as IG_CONV_PARAMS (below): convsolve.h's CS_CONV_PARAMS of the height
 * and width, then the depth's (input D, filter Z, output OD, pad PAD_F, stride, dilation).
 *
 * Defines read: DIRECTION (0, 1, 2: which table row; each solver builds its own); X_LAST,
 * W_LAST, Y_LAST (1: that tensor channels-last); the epilogue's (convsolve_epilogue.h).
 */
#ifndef IGEMM_COMMON_CL
#define IGEMM_COMMON_CL
#include "convsolve_epilogue.h"

#ifndef DIRECTION
#define DIRECTION 0 /* 0 forward, 1 backward data, 2 backward weights */
#endif
#if DIRECTION < 0 || DIRECTION > 2
#error "DIRECTION must be 0 (forward), 1 (backward data) or 2 (backward weights)"
#endif

#ifndef X_LAST
#define X_LAST 0 /* 1: x (dx) channels-last (NWC, NHWC, NDHWC); 0: channels-first */
#endif
#ifndef W_LAST
#define W_LAST 0 /* 1: w (dw) channels-last (K, filter..., C/G); 0: channels-first */
#endif
#ifndef Y_LAST
#define Y_LAST 0 /* 1: y (dy) channels-last; 0: channels-first */
#endif

/* Whether B's tensor is channels-last (forward and backward weights: x; backward data: dy), and
 * the digit order that follows: consecutive j (forward, backward data) or p (backward weights)
 * consecutive channels of B, so consecutive elements. */
#if DIRECTION == 1
#define IG_B_LAST Y_LAST
#else
#define IG_B_LAST X_LAST
#endif
#define IG_J_INNER (IG_B_LAST && DIRECTION != 2)
#define IG_P_INNER (IG_B_LAST && DIRECTION == 2)

#define IG_CAT_(a, b) a##b
#define IG_CAT(a, b) IG_CAT_(a, b) /* pastes after expanding: IG_CAT(float, VW) is float4 */

#define IG_CONV_PARAMS                                                                  \
    CS_CONV_PARAMS, const int D, const int Z, const int OD, const int PAD_F,            \
    const int STRIDE_D, const int DIL_D
#define IG_CONV_ARGS                                                                    \
    N, C, H, W, K, R, S, OH, OW, G, PAD_T, PAD_L, STRIDE_H, STRIDE_W, DIL_H, DIL_W, D, Z,  \
    OD, PAD_F, STRIDE_D, DIL_D

typedef struct {
    int M, P;                 /* rows and columns of C in this slice */
    int j_begin, j_end;       /* the slice's part of the reduction, [j_begin, j_end) */
    int P0, PD, P1, P2, J0, JD, J1, J2;   /* radices of the digits of p and j */
    int a_off, a_m, a_j0, a_jd, a_j1, a_j2;
    int b_off, b_p0, b_j0, b_pix, d_p, d_j, d_off, r_p, r_j, r_off, c_p, c_j, c_off, BD, BH,
        BW, b_size;
    int o_off, o_m, o_p0, o_pd, o_p1, o_p2, o_chan;
} IgGemm;

/* One tensor's element strides: n, channel, pixel (one spatial step along the width). */
typedef struct {
    int n, c, pix;
} IgStrides;

/* The strides of a tensor of `chans` channels and `pixels` pixels an image, `last` its layout
 * (channels-last: the pixel stride is the channel count). */
inline void ig_strides(int chans, int pixels, bool last, IgStrides *t)
{
    t->n = chans * pixels;
    t->c = last ? 1 : pixels;
    t->pix = last ? chans : 1;
}

/* Backward data along one dimension (stride s, dilation d, padding pad, filter f, dx size n):
 * the dx positions a + i * s of phase a (i < *extent) receive the taps  r = *r0 + t * *tap_step
 * (t < *taps) from dy position i + *off - t * *dd (r0 + t * *tap_step: the taps). */
inline void ig_phase(int a, int s, int d, int pad, int f, int n, int *extent, int *taps,
                     int *r0, int *tap_step, int *off, int *dd)
{
    *extent = a < n ? (n - a + s - 1) / s : 0;
    int first = -1;
    for (int r = min(f, s) - 1; r >= 0; --r)      /* the smallest tap reaching phase a */
        if ((a + pad - r * d) % s == 0)
            first = r;
    int apart = 1;
    while ((apart * d) % s != 0)                  /* taps reaching one phase are apart */
        ++apart;
    *tap_step = apart;
    *taps = first < 0 ? 0 : (f - first + apart - 1) / apart;
    *r0 = max(first, 0);
    *off = (a + pad - *r0 * d) / s;               /* exact where taps > 0 */
    *dd = apart * d / s;
}

/* *d = the GEMM of slice z (get_group_id(2) or get_global_id(2)) of the launch.  (Structs go
 * by pointer: passed or returned by value, they make LLVM emit noalias scopes Oclgrind rejects.)
 * Weights are an image of C/G channels and Z * R * S pixels per output channel k. */
inline void ig_describe(IgGemm *d, IG_CONV_PARAMS, const int SPLITS, const int z)
{
    const int g = z % G, Cg = C / G, Kg = K / G, RS = R * S, OHW = OH * OW, HW = H * W;
    const int ZRS = Z * RS, ODHW = OD * OHW, DHW = D * HW;
    IgStrides x, w, y;
    ig_strides(C, DHW, X_LAST, &x);
    ig_strides(Cg, ZRS, W_LAST, &w);
    ig_strides(K, ODHW, Y_LAST, &y);
#if DIRECTION == 0
    const int split = z / G, depth = Cg * ZRS, share = CS_DIV_UP(depth, SPLITS);
    d->M = Kg;  d->P = N * ODHW;  d->j_begin = min(split * share, depth);
    d->j_end = min(d->j_begin + share, depth);
    d->P0 = N;  d->PD = OD;  d->P1 = OH;  d->P2 = OW;  d->J0 = Cg;  d->JD = Z;  d->J1 = R;
    d->J2 = S;
    d->a_off = g * Kg * w.n;  d->a_m = w.n;  d->a_j0 = w.c;  d->a_jd = RS * w.pix;
    d->a_j1 = S * w.pix;  d->a_j2 = w.pix;
    d->b_off = g * Cg * x.c;  d->b_p0 = x.n;  d->b_j0 = x.c;  d->b_pix = x.pix;  d->BD = D;
    d->BH = H;  d->BW = W;  d->b_size = N * C * DHW;
    d->d_p = STRIDE_D;  d->d_j = DIL_D;  d->d_off = -PAD_F;
    d->r_p = STRIDE_H;  d->r_j = DIL_H;  d->r_off = -PAD_T;
    d->c_p = STRIDE_W;  d->c_j = DIL_W;  d->c_off = -PAD_L;
    /* one split writes y itself; more write partial y (in y's layout) one after the other
     * (the workspace) */
    d->o_off = split * N * y.n + g * Kg * y.c;  d->o_m = y.c;  d->o_p0 = y.n;
    d->o_pd = OHW * y.pix;
    d->o_p1 = OW * y.pix;  d->o_p2 = y.pix;  d->o_chan = g * Kg;
#elif DIRECTION == 1
    const int phase = z / G, ad = phase / (STRIDE_H * STRIDE_W);
    const int ah = phase / STRIDE_W % STRIDE_H, aw = phase % STRIDE_W;
    int dp, td, t0, tstep, doff, ddd, hp, th, r0, rstep, hoff, hdd, wp, tw, s0, sstep, woff, wdd;
    ig_phase(ad, STRIDE_D, DIL_D, PAD_F, Z, D, &dp, &td, &t0, &tstep, &doff, &ddd);
    ig_phase(ah, STRIDE_H, DIL_H, PAD_T, R, H, &hp, &th, &r0, &rstep, &hoff, &hdd);
    ig_phase(aw, STRIDE_W, DIL_W, PAD_L, S, W, &wp, &tw, &s0, &sstep, &woff, &wdd);
    d->M = Cg;  d->P = N * dp * hp * wp;  d->j_begin = 0;  d->j_end = Kg * td * th * tw;
    d->P0 = N;  d->PD = max(dp, 1);  d->P1 = max(hp, 1);  d->P2 = max(wp, 1);
    d->J0 = Kg;  d->JD = max(td, 1);  d->J1 = max(th, 1);  d->J2 = max(tw, 1);
    d->a_off = g * Kg * w.n + (t0 * RS + r0 * S + s0) * w.pix;  d->a_m = w.c;
    d->a_j0 = w.n;  d->a_jd = tstep * RS * w.pix;  d->a_j1 = rstep * S * w.pix;
    d->a_j2 = sstep * w.pix;
    d->b_off = g * Kg * y.c;  d->b_p0 = y.n;  d->b_j0 = y.c;  d->b_pix = y.pix;  d->BD = OD;
    d->BH = OH;  d->BW = OW;  d->b_size = N * K * ODHW;
    d->d_p = 1;  d->d_j = -ddd;  d->d_off = doff;
    d->r_p = 1;  d->r_j = -hdd;  d->r_off = hoff;  d->c_p = 1;  d->c_j = -wdd;  d->c_off = woff;
    d->o_off = g * Cg * x.c + ((ad * H + ah) * W + aw) * x.pix;  d->o_m = x.c;  d->o_p0 = x.n;
    d->o_pd = STRIDE_D * HW * x.pix;  d->o_p1 = STRIDE_H * W * x.pix;
    d->o_p2 = STRIDE_W * x.pix;  d->o_chan = g * Cg;
#else
    const int split = z / G, depth = N * ODHW, share = CS_DIV_UP(depth, SPLITS);
    d->M = Kg;  d->P = Cg * ZRS;  d->j_begin = min(split * share, depth);
    d->j_end = min(d->j_begin + share, depth);
    d->P0 = Cg;  d->PD = Z;  d->P1 = R;  d->P2 = S;  d->J0 = N;  d->JD = OD;  d->J1 = OH;
    d->J2 = OW;
    d->a_off = g * Kg * y.c;  d->a_m = y.c;  d->a_j0 = y.n;  d->a_jd = OHW * y.pix;
    d->a_j1 = OW * y.pix;  d->a_j2 = y.pix;
    d->b_off = g * Cg * x.c;  d->b_p0 = x.c;  d->b_j0 = x.n;  d->b_pix = x.pix;  d->BD = D;
    d->BH = H;  d->BW = W;  d->b_size = N * C * DHW;
    d->d_p = DIL_D;  d->d_j = STRIDE_D;  d->d_off = -PAD_F;
    d->r_p = DIL_H;  d->r_j = STRIDE_H;  d->r_off = -PAD_T;
    d->c_p = DIL_W;  d->c_j = STRIDE_W;  d->c_off = -PAD_L;
    /* one split writes dw itself; more write partial dw (in dw's layout) one after the other
     * (the workspace) */
    d->o_off = (split * G + g) * Kg * w.n;  d->o_m = w.n;  d->o_p0 = w.c;  d->o_pd = RS * w.pix;
    d->o_p1 = S * w.pix;  d->o_p2 = w.pix;  d->o_chan = g * Kg;
#endif
}

/* The digits of a reduction index j, with the parts of A's and B's offsets they give. */
typedef struct {
    int j, j0, jd, j1, j2;
} IgDigits;

inline void ig_digits(const IgGemm *d, int j, IgDigits *t)
{
    t->j = j;
#if IG_J_INNER
    t->j0 = j % d->J0;
    j /= d->J0;
    t->j2 = j % d->J2;
    t->j1 = (j / d->J2) % d->J1;
    t->jd = j / (d->J2 * d->J1);
#else
    t->j2 = j % d->J2;
    t->j1 = (j / d->J2) % d->J1;
    t->jd = (j / (d->J2 * d->J1)) % d->JD;
    t->j0 = j / (d->J2 * d->J1 * d->JD);
#endif
}

/* *t advanced by step->j, whose own digits *step holds (so each digit carries at most once). */
inline void ig_advance(const IgGemm *d, IgDigits *t, const IgDigits *step)
{
    t->j += step->j;
#if IG_J_INNER
    t->j0 += step->j0;
    if (t->j0 >= d->J0) {
        t->j0 -= d->J0;
        t->j2 += 1;
    }
#endif
    t->j2 += step->j2;
    if (t->j2 >= d->J2) {
        t->j2 -= d->J2;
        t->j1 += 1;
    }
    t->j1 += step->j1;
    if (t->j1 >= d->J1) {
        t->j1 -= d->J1;
        t->jd += 1;
    }
    t->jd += step->jd;
#if !IG_J_INNER
    if (t->jd >= d->JD) {
        t->jd -= d->JD;
        t->j0 += 1;
    }
    t->j0 += step->j0;
#endif
}

inline int ig_a_offset(const IgGemm *d, const IgDigits *t)
{
    return d->a_off + t->j0 * d->a_j0 + t->jd * d->a_jd + t->j1 * d->a_j1 + t->j2 * d->a_j2;
}

/* Where column p of B sits: its plane offset, and its depth, row and column before j's share. */
typedef struct {
    int plane, dep, row, col, out;
} IgColumn;

/* Column p's place in B and in C; a column past P gets a row no j can bring into range. */
inline void ig_column(const IgGemm *d, int p, IgColumn *c)
{
#if IG_P_INNER
    const int p0 = p % d->P0, q = p / d->P0;
    const int p2 = q % d->P2, p1 = (q / d->P2) % d->P1, pd = (q / (d->P2 * d->P1)) % d->PD;
#else
    const int p2 = p % d->P2, p1 = (p / d->P2) % d->P1, pd = (p / (d->P2 * d->P1)) % d->PD;
    const int p0 = p / (d->P2 * d->P1 * d->PD);
#endif
    c->plane = d->b_off + p0 * d->b_p0;
    c->dep = pd * d->d_p + d->d_off;
    c->row = p < d->P ? p1 * d->r_p + d->r_off : INT_MIN / 2;
    c->col = p2 * d->c_p + d->c_off;
    c->out = d->o_off + p0 * d->o_p0 + pd * d->o_pd + p1 * d->o_p1 + p2 * d->o_p2;
}

/* Whether B[j][p] lies inside the window (backward data: whether the product exists). */
inline bool ig_b_inside(const IgGemm *d, const IgColumn *c, const IgDigits *t)
{
    const int dep = c->dep + t->jd * d->d_j;
    const int row = c->row + t->j1 * d->r_j, col = c->col + t->j2 * d->c_j;
    return dep >= 0 && dep < d->BD && row >= 0 && row < d->BH && col >= 0 && col < d->BW;
}

/* B[j][p], 0 outside the window. */
inline float ig_b(const IgGemm *d, __global const real *b, const IgColumn *c,
                  const IgDigits *t)
{
    const int dep = c->dep + t->jd * d->d_j;
    const int row = c->row + t->j1 * d->r_j, col = c->col + t->j2 * d->c_j;
    return ig_b_inside(d, c, t)
        ? (float)b[c->plane + t->j0 * d->b_j0 + ((dep * d->BH + row) * d->BW + col) * d->b_pix]
        : 0.0f;
}

#endif /* IGEMM_COMMON_CL */
