/* depthwise_nhwc.cl: depthwise convolution (groups = C, K = C * M, multiplier M >= 1) on
 * channels-last tensors of spatial rank 1, 2 or 3, all three directions.
 *
 * Layouts: x N x D x H x W x C (NWC, NHWC, NDHWC), y N x OD x OH x OW x K, w K x Z x R x S
 * (channels-first K x 1 x Z x R x S and channels-last K x Z x R x S x 1: one memory order); all
 * packed, float32.  Output channel k reads input channel k / M.  Every problem is 3-D here
 * (nd_common.cl: depth and height 1 below rank 3 and 2).  Channels are innermost, so a
 * work-item computes a vector of VW consecutive channels of PX consecutive pixels along the
 * width with whole-vector loads and stores (dwl_lanes, dwl_store); the last vector of a pixel,
 * past the last channel, has fewer lanes and takes a lane loop, as do loads whose lanes are not
 * consecutive (x at multiplier M > 1, dy's and wt's channels c * M + m in dwl_bwd).
 * Bandwidth-bound: no local memory; neighbouring work-items read neighbouring channels
 * (coalesced on GPUs).  Dynamic: every size is a kernel argument (ND_SIZES; G is C).
 *
 * dwl_weights(w, wt, K, taps)
 *   Forward's and backward-data's first kernel: wt[tap * K + k] = w[k * taps + tap] (taps =
 *   Z * R * S), the weights channels innermost in the workspace (K * taps elements), so that a
 *   tap's vector of channels is one load.  global (K * taps rounded up to WG), local (WG).
 * dwl_fwd(x, wt, y, ND_SIZES)
 *   y[n, od, oh, ow, k] = sum over z, r, s of x[n, od*SD - PF + z*DD, .., .., k / M] *
 *   wt[(z, r, s), k]; padding is zeros that take part in the products (0 * inf = NaN, as in the
 *   reference).  Items: ceil(K / VW) x N x OD x OH x ceil(OW / PX), the channel vector fastest.
 * dwl_bwd(dx, wt, dy, ND_SIZES)
 *   dx[n, d, h, iw, c] = sum over m, z, r, s of dy[n, od, oh, ow, c*M + m] *
 *   wt[(z, r, s), c*M + m]
 *   over the taps whose (d + PF - z*DD) / SD, ... are whole positions inside dy: a gather, so
 *   positions outside dy contribute nothing, exactly.  Items: ceil(C / VW) x N x D x H x
 *   ceil(W / PX), the channel vector fastest.
 *   Both: global (items rounded up to WG), local (WG): a fixed local size, so that PoCL
 *   compiles one work-group function per build; items past the end return at once.
 * dwl_wrw(x, dy, partial, ND_SIZES, PR, TPI, n_first)
 *   Stage 1 of plan.Partials' two-stage reduction: work-item (vector, tap; the vector fastest)
 *   of slot (image n_first + slot / TPI, tile p = slot % TPI) sums dy * x over output rows
 *   [p * PR, p * PR + PR) (a row: one (od, oh)) of its image, in PX accumulators that take the
 *   columns in turn and are added in order at the end, into partial[slot][k][tap]; the core's
 *   split sum adds the slots up in order (deterministic).  Padding takes part, as forward.
 *   global (ceil(K / VW) * Z * R * S rounded up to WG, images * TPI), local (WG, 1).
 *
 * Defines read: VW, PX, CS_PRECISION.
 */
#ifndef VW
#define VW 8      /* channels per vector: 1, 2, 4, 8 or 16 */
#endif
#ifndef PX
#define PX 4      /* pixels along the width per work-item (accumulators of wrw) */
#endif

#include "direct_common.cl"
#include "nd_common.cl"

/* Lane i < lanes: t[at + (first + i) * mul / div], 0 in the other lanes; one vector load where
 * every lane is there and the lanes are consecutive (mul == div == 1).  The lanes of a strided
 * load (dy and wt at M > 1) take no division: one per lane and tap was most of a CPU's
 * time (3x on MobileNet-v2's 56x56 layer, PoCL, AVX2). */
inline vec dwl_lanes(__global const real *t, size_t at, int first, int lanes, int mul, int div)
{
    if (lanes == VW && mul == 1 && div == 1)
        return GLOAD(t + at + first);
    float v[VW];
    if (div == 1) {
        const __global real *lane = t + at + (size_t)first * mul;
        for (int i = 0; i < VW; ++i)
            v[i] = i < lanes ? (float)lane[(size_t)i * mul] : 0.0f;
    } else {
        for (int i = 0; i < VW; ++i)
            v[i] = i < lanes ? (float)t[at + (size_t)(first + i) * mul / div] : 0.0f;
    }
    return VLOAD(v);
}

/* t[at + i] = v's lane i for i < lanes: one vector store where every lane is there. */
inline void dwl_store(__global real *t, size_t at, int lanes, vec v)
{
    if (lanes == VW) {
        GSTORE(v, t + at);
        return;
    }
    float s[VW];
    VSTORE(v, s);
    for (int i = 0; i < lanes; ++i)
        t[at + i] = (real)s[i];
}

/* What a forward or backward-data work-item writes: channels [c0, c0 + lanes) of PX pixels
 * from column p0 of row (n, d, h) of the output (channels x depth x height x width a pixel;
 * row = (n * depth + d) * height + h); lanes 0 for an item past the end.  The channel vector
 * is the fastest index, then the pixel block, then the row. */
typedef struct {
    int c0, lanes, p0, h, d, n;
    size_t row;
} dwl_cell;

inline dwl_cell dwl_cell_of(size_t item, int channels, int images, int depth, int height,
                            int width)
{
    const int vectors = CS_DIV_UP(channels, VW), blocks = CS_DIV_UP(width, PX);
    dwl_cell cell = {0, 0, 0, 0, 0, 0, 0};
    if (item >= (size_t)vectors * images * depth * height * blocks)
        return cell;
    const size_t block = item / vectors;
    cell.row = block / blocks;
    cell.c0 = item % vectors * VW;
    cell.lanes = min(VW, channels - cell.c0);
    cell.p0 = block % blocks * PX;
    cell.h = cell.row % height;
    cell.d = cell.row / height % depth;
    cell.n = cell.row / height / depth;
    return cell;
}

__kernel void dwl_weights(__global const real *w, __global real *wt, const int K, const int taps)
{
    const size_t item = get_global_id(0);
    if (item < (size_t)K * taps)
        wt[item] = w[item % K * taps + item / K];
}

__kernel void dwl_fwd(__global const real *x, __global const real *wt, __global real *y,
                      ND_SIZES)
{
    const int M = K / C;
    const dwl_cell at = dwl_cell_of(get_global_id(0), K, N, OD, OH, OW);
    if (!at.lanes)
        return;
    const int k0 = at.c0, lanes = at.lanes, ow0 = at.p0, oh = at.h, od = at.d, n = at.n;
    const size_t row = at.row;   /* (n * OD + od) * OH + oh */
    vec acc[PX];
    for (int p = 0; p < PX; ++p)
        acc[p] = (vec)0.0f;
    for (int z = 0; z < Z; ++z) {
        const int id = od * STRIDE_D - PAD_F + z * DIL_D;
        for (int r = 0; r < R; ++r) {
            const int ih = oh * STRIDE_H - PAD_T + r * DIL_H;
            const bool inside = id >= 0 && id < D && ih >= 0 && ih < H;
            const size_t line = inside ? (((size_t)n * D + id) * H + ih) * W : 0;
            for (int s = 0; s < S; ++s) {
                const vec wv = dwl_lanes(wt, (size_t)((z * R + r) * S + s) * K, k0, lanes, 1,
                                         1);
                for (int p = 0; p < PX; ++p) {
                    const int iw = (ow0 + p) * STRIDE_W - PAD_L + s * DIL_W;
                    const vec in = inside && iw >= 0 && iw < W
                        ? dwl_lanes(x, (line + iw) * C, k0, lanes, 1, M) : (vec)0.0f;
                    acc[p] = fma(in, wv, acc[p]);
                }
            }
        }
    }
    for (int p = 0; p < PX && ow0 + p < OW; ++p)
        dwl_store(y, (row * OW + ow0 + p) * K + k0, lanes, acc[p]);
}

__kernel void dwl_bwd(__global real *dx, __global const real *wt, __global const real *dy,
                      ND_SIZES)
{
    const int M = K / C;
    const dwl_cell at = dwl_cell_of(get_global_id(0), C, N, D, H, W);
    if (!at.lanes)
        return;
    const int c0 = at.c0, lanes = at.lanes, iw0 = at.p0, h = at.h, d = at.d, n = at.n;
    const size_t row = at.row;   /* (n * D + d) * H + h */
    vec acc[PX];
    for (int p = 0; p < PX; ++p)
        acc[p] = (vec)0.0f;
    for (int m = 0; m < M; ++m)
        for (int z = 0; z < Z; ++z) {
            const int od = nd_window(d, z, PAD_F, STRIDE_D, DIL_D, OD);
            if (od < 0)
                continue;
            for (int r = 0; r < R; ++r) {
                const int oh = nd_window(h, r, PAD_T, STRIDE_H, DIL_H, OH);
                if (oh < 0)
                    continue;
                const size_t line = (((size_t)n * OD + od) * OH + oh) * OW;
                for (int s = 0; s < S; ++s) {
                    const vec wv = dwl_lanes(wt, (size_t)((z * R + r) * S + s) * K + m, c0,
                                             lanes, M, 1);
                    for (int p = 0; p < PX; ++p) {
                        const int ow = nd_window(iw0 + p, s, PAD_L, STRIDE_W, DIL_W, OW);
                        if (ow >= 0)
                            acc[p] = fma(dwl_lanes(dy, (line + ow) * K + m, c0, lanes, M, 1), wv,
                                         acc[p]);
                    }
                }
            }
        }
    for (int p = 0; p < PX && iw0 + p < W; ++p)
        dwl_store(dx, (row * W + iw0 + p) * C + c0, lanes, acc[p]);
}

__kernel void dwl_wrw(__global const real *x, __global const real *dy, __global float *partial,
                      ND_SIZES, const int PR, const int TPI, const int n_first)
{
    const int M = K / C, taps = Z * R * S, vectors = CS_DIV_UP(K, VW);
    const size_t item = get_global_id(0);
    if (item >= (size_t)vectors * taps)
        return;
    const int k0 = item % vectors * VW, tap = item / vectors, lanes = min(VW, K - k0);
    const int z = tap / (R * S), r = tap / S % R, s = tap % S;
    const int slot = get_global_id(1), n = n_first + slot / TPI, p0 = slot % TPI;
    vec acc[PX];
    for (int p = 0; p < PX; ++p)
        acc[p] = (vec)0.0f;
    for (int q = p0 * PR; q < min(OD * OH, (p0 + 1) * PR); ++q) {   /* q = od * OH + oh */
        const int id = q / OH * STRIDE_D - PAD_F + z * DIL_D;
        const int ih = q % OH * STRIDE_H - PAD_T + r * DIL_H;
        const bool inside = id >= 0 && id < D && ih >= 0 && ih < H;
        const size_t line = inside ? (((size_t)n * D + id) * H + ih) * W : 0;
        const size_t out = ((size_t)n * OD * OH + q) * OW;
        for (int ow0 = 0; ow0 < OW; ow0 += PX)
            for (int p = 0; p < PX; ++p) {
                const int ow = ow0 + p, iw = ow * STRIDE_W - PAD_L + s * DIL_W;
                if (ow >= OW)
                    continue;
                const vec in = inside && iw >= 0 && iw < W
                    ? dwl_lanes(x, (line + iw) * C, k0, lanes, 1, M) : (vec)0.0f;
                acc[p] = fma(dwl_lanes(dy, (out + ow) * K, k0, lanes, 1, 1), in, acc[p]);
            }
    }
    vec sum = acc[0];
    for (int p = 1; p < PX; ++p)
        sum += acc[p];
    float v[VW];
    VSTORE(sum, v);
    for (int i = 0; i < lanes; ++i)
        partial[((size_t)slot * K + k0 + i) * taps + tap] = v[i];
}
