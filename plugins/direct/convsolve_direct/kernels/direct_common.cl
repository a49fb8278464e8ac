/* direct_common.cl: vector helpers shared by the direct family's fast kernels (tiled.cl,
 * depthwise.cl, wrw.cl), and their stores of the output with its epilogue (DC_STORE).
 *
 * A `vec` is VW consecutive output pixels of one row (VW = 1, 2, 4, 8 or 16; `float` when 1):
 * explicit vector types are what makes PoCL emit 512-bit (float16) or 256-bit (float8) code on
 * CPUs; GPUs take VW = 1 or 2.  Lane-wise work (borders, strided stores) goes through a private
 * array, which every OpenCL compiler accepts (no run-time vector indexing).
 *
 * Defines read: VW (the including file gives its #ifndef default first), CS_PRECISION, the
 * optional FIL_H, FIL_W: a compiled-in filter size (FR, FS; else the arguments R, S of the
 * kernel), and the epilogue's (convsolve_epilogue.h).
 */
#ifndef DIRECT_COMMON_CL
#define DIRECT_COMMON_CL

#include "convsolve_epilogue.h"

#if VW != 1 && VW != 2 && VW != 4 && VW != 8 && VW != 16
#error "VW must be 1, 2, 4, 8 or 16"
#endif

#define DC_CAT_(a, b) a##b
#define DC_CAT(a, b) DC_CAT_(a, b)

#if VW == 1
typedef float vec;
typedef int ivec;
#define VLOAD(p) (*(p))
#define VSTORE(v, p) (*(p) = (v))
#define DC_LANES 0
#else
typedef DC_CAT(float, VW) vec;
typedef DC_CAT(int, VW) ivec;
#define VLOAD(p) DC_CAT(vload, VW)(0, (p))
#define VSTORE(v, p) DC_CAT(vstore, VW)((v), 0, (p))
#if VW == 2
#define DC_LANES ((int2)(0, 1))
#elif VW == 4
#define DC_LANES ((int4)(0, 1, 2, 3))
#elif VW == 8
#define DC_LANES ((int8)(0, 1, 2, 3, 4, 5, 6, 7))
#else
#define DC_LANES ((int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15))
#endif
#endif

/* One vector from (GLOAD, GSTORE) global or (LLOAD, LSTORE) local memory at any 4-byte
 * aligned address.  With clang (PoCL) and 8- or 16-wide vectors, through a vector type aligned
 * to 4 bytes: one unaligned vector move, where PoCL's vload16 / vstore16 are split into two or
 * three narrower moves.  VLOAD / VSTORE serve private arrays. */
#if VW >= 8 && defined(__clang__)
typedef float dc_uvec __attribute__((ext_vector_type(VW), aligned(4)));
#define GLOAD(p) (*(__global const dc_uvec *)(p))
#define GSTORE(v, p) (*(__global dc_uvec *)(p) = (v))
#define LLOAD(p) (*(__local const dc_uvec *)(p))
#define LSTORE(v, p) (*(__local dc_uvec *)(p) = (v))
#else
#define GLOAD(p) VLOAD(p)
#define GSTORE(v, p) VSTORE(v, p)
#define LLOAD(p) VLOAD(p)
#define LSTORE(v, p) VSTORE(v, p)
#endif

/* Lanes i < VW with 0 <= first + i < limit: all ones (vectors) or 1 (VW = 1) where true. */
#define DC_LANE_MASK(first, limit) \
    ((DC_LANES + (first) >= 0) & (DC_LANES + (first) < (limit)))

/* Every other element of the 2 * VW floats a, b: a stride-2 row from two contiguous loads. */
#if VW == 1
#define DC_EVEN(a, b) (a)
#else
#define DC_EVEN(a, b) ((vec)((a).even, (b).even))
#endif

/* t[row + iw0 + i * stride] for lanes i < lanes, 0 where the column lies outside [0, W) or
 * i >= lanes: a row of a forward-sense tensor t of `total` elements with its zero padding.
 * Vectors wholly inside the row take one load (stride 1) or two (stride 2); at the row's ends
 * they still do, reading neighbouring elements of the tensor (never outside it) and replacing
 * them by zeros with a select (no arithmetic on them, so their values never matter); only at
 * the tensor's own ends, or for other strides, does a lane loop run. */
inline vec dc_load(__global const real *t, size_t total, size_t row, int iw0, int stride,
                   int W, int lanes)
{
    if (lanes <= 0)
        return (vec)0.0f;
    const long first = (long)row + iw0;
    if (stride <= 2 && first >= 0 && first + VW * stride <= (long)total) {
        __global const real *p = t + first;
#if VW > 1
        const vec v = stride == 1 ? GLOAD(p) : DC_EVEN(GLOAD(p), GLOAD(p + VW));
#else
        const vec v = GLOAD(p);
#endif
        if (lanes == VW && iw0 >= 0 && iw0 + VW * stride <= W)
            return v;
        const ivec column = iw0 + DC_LANES * stride;
        return select((vec)0.0f, v, (column >= 0) & (column < W) & (DC_LANES < lanes));
    }
    float x[VW];
    for (int i = 0; i < VW; ++i) {
        const int iw = iw0 + i * stride;
        x[i] = (i < lanes && iw >= 0 && iw < W) ? (float)t[row + iw] : 0.0f;
    }
    return VLOAD(x);
}

/* p[i * stride], i < VW, from local memory; stride 1 and 2 read VW * stride floats. */
inline vec dc_local_load(__local const float *p, int stride)
{
    if (stride == 1)
        return LLOAD(p);
#if VW > 1
    if (stride == 2)
        return DC_EVEN(LLOAD(p), LLOAD(p + VW));
#endif
    float t[VW];
    for (int i = 0; i < VW; ++i)
        t[i] = p[i * stride];
    return VLOAD(t);
}

/* row[iw0 + i * stride] = v's lane i for the lanes with iw0 + i * stride < W (iw0 >= 0). */
inline void dc_store(__global real *row, int iw0, int stride, int W, vec v)
{
    if (stride == 1 && iw0 + VW <= W) {
        GSTORE(v, row + iw0);
        return;
    }
    float t[VW];
    VSTORE(v, t);
    for (int i = 0; i < VW && iw0 + i * stride < W; ++i)
        row[iw0 + i * stride] = (real)t[i];
}

/* DC_STORE(out, at, iw0, stride, W, v, k): dc_store(out + at, iw0, stride, W, v) of output
 * channel k, after the output's epilogue (convsolve_epilogue.h: `epi` in scope) where it has one;
 * z and the prior output are read at the stored elements, as vectors where v is stored whole. */
#if CS_EPI
#define DC_LOAD_AT(p, at) GLOAD((p) + (at))
inline void dc_store_epi(__global real *out, size_t at, int iw0, int stride, int W, vec v,
                         int k, const cs_epilogue epi)
{
    at += iw0;
    if (stride == 1 && iw0 + VW <= W) {
        CS_EPILOGUE(vec, DC_LOAD_AT, epi, v, k, out, at);
        GSTORE(v, out + at);
        return;
    }
    float t[VW];
    VSTORE(v, t);
    for (int i = 0; i < VW && iw0 + i * stride < W; ++i)   /* rolled: one copy of the code */
        CS_EPI_STORE(epi, out, at + i * stride, k, t[i]);
}
#define DC_STORE(out, at, iw0, stride, W, v, k) dc_store_epi(out, at, iw0, stride, W, v, k, epi)
#else
#define DC_STORE(out, at, iw0, stride, W, v, k) dc_store((out) + (at), iw0, stride, W, v)
#endif

/* DC_STORE_SPILL(out, at, iw0, W, v, k, spill): DC_STORE at stride 1, except that with `spill`
 * a vector running past the row's end W is stored whole, not lane by lane: its lanes past the
 * end rewrite the elements that follow (the next rows' first ones) with the values read there
 * first.  The caller vouches that no other work-item writes those elements. */
#if CS_EPI
inline void dc_store_spill(__global real *out, size_t at, int iw0, int W, vec v, int k,
                           bool spill, const cs_epilogue epi)
{
    if (iw0 + VW <= W || !spill) {
        dc_store_epi(out, at, iw0, 1, W, v, k, epi);
        return;
    }
    at += iw0;
    const vec old = GLOAD(out + at);
    CS_EPILOGUE(vec, DC_LOAD_AT, epi, v, k, out, at);
    GSTORE(select(old, v, DC_LANE_MASK(iw0, W)), out + at);
}
#define DC_STORE_SPILL(out, at, iw0, W, v, k, spill) \
    dc_store_spill(out, at, iw0, W, v, k, spill, epi)
#else
inline void dc_store_spill(__global real *out, int iw0, int W, vec v, bool spill)
{
    if (iw0 + VW <= W || !spill) {
        dc_store(out, iw0, 1, W, v);
        return;
    }
    const vec old = GLOAD(out + iw0);
    GSTORE(select(old, v, DC_LANE_MASK(iw0, W)), out + iw0);
}
#define DC_STORE_SPILL(out, at, iw0, W, v, k, spill) \
    dc_store_spill((out) + (at), iw0, W, v, spill)
#endif

/* The sum of v's lanes by halving (lo + hi, down to one lane): a fixed order, deterministic. */
inline float dc_hsum(vec v)
{
#if VW == 16
    const float8 h8 = v.lo + v.hi;
#elif VW == 8
    const float8 h8 = v;
#endif
#if VW >= 8
    const float4 h4 = h8.lo + h8.hi;
#elif VW == 4
    const float4 h4 = v;
#endif
#if VW >= 4
    const float2 h2 = h4.lo + h4.hi;
#elif VW == 2
    const float2 h2 = v;
#endif
#if VW >= 2
    return h2.x + h2.y;
#else
    return v;
#endif
}

/* filter size: compiled in (FIL_H, FIL_W; tap loops unrolled), or the kernel's R and S */
#ifdef FIL_H
#define FR FIL_H    /* filter rows: compiled in, or the argument R */
#else
#define FR R
#endif
#ifdef FIL_W
#define UNROLL_TAPS _Pragma("unroll")   /* unroll the tap loops of a compiled-in filter */
#define FS FIL_W    /* filter columns: compiled in, or the argument S */
#else
#define UNROLL_TAPS
#define FS S
#endif

#endif /* DIRECT_COMMON_CL */
