/* unfold_rows.cl: the innermost dimension of im2col and col2im (im2col.cl, unfold_nd.cl): one
 * row of columns, in vectors where a run lies inside its row at stride 1 or 2 (work-items of
 * IM2COL_TW >= 8 or COL2IM_TW >= 16 columns: the CPU settings), else a column at a time.
 * Included after convsolve.h and the IM2COL_TW and COL2IM_TW defines.
 */

/* Lanes 0-7 of a and b alternating: a0 b0 a1 b1 ... (shuffle2's mask). */
#define UNFOLD_INTERLEAVE (uint16)(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15)

/* x's row at iw, or 0 outside [0, W). */
static inline real unfold_at(const __global real *xr, const int iw, const int W)
{
    return (iw >= 0 && iw < W) ? xr[iw] : (real)0;
}

/* im2col: out[t] = xr[iw0 + t * stride] for t < nw (0 outside the row). */
static inline void im2col_row(__global real *out, const __global real *xr, const int iw0,
                              const int stride, const int W, const int nw)
{
    int t = 0;
#if IM2COL_TW >= 8
    /* 8 columns a vector inside the row (stride 2: the even lanes of 16 loaded) */
    for (; t + 8 <= nw; t += 8) {
        const int iw = iw0 + t * stride;
        if (stride <= 2 && iw >= 0 && iw + 8 * stride <= W)
            vstore8(stride == 1 ? vload8(0, xr + iw) : vload16(0, xr + iw).even, 0, out + t);
        else
            for (int u = t; u < t + 8; ++u)
                out[u] = unfold_at(xr, iw0 + u * stride, W);
    }
#endif
    for (; t < nw; ++t)
        out[t] = unfold_at(xr, iw0 + t * stride, W);
}

/* col2im: the columns [*va, *vb) of a work-item's nw columns from iw0 that col2im_block_tap
 * sums 16 at a time: blocks from the first column whose every tap (pad, dilation, `taps` taps)
 * lies at ow >= 0, while the last column's first tap stays below OW.  Empty where vectors do
 * not apply. */
static inline void col2im_blocks(const int iw0, const int nw, const int pad, const int dil,
                                 const int taps, const int stride, const int OW, int *va, int *vb)
{
    *va = *vb = 0;
#if COL2IM_TW >= 16
    if (stride > 2)
        return;
    *va = *vb = clamp((taps - 1) * dil - pad - iw0, 0, nw);
    while (*vb + 16 <= nw && (iw0 + *vb + 15 + pad) / stride < OW)
        *vb += 16;
#endif
}

/* col2im, one tap, the columns t in [t0, t1) one at a time: sum[t] += crow[ow] where
 * ow * stride == tw0 + t, 0 <= ow < OW (tw0: the work-item's first column plus the padding,
 * less the tap's offset).  At a stride past 1 the loop runs over the ow that reach the
 * columns, so no column pays a division (a test a column made stride-2 col2im 3.5 GB/s). */
static inline void col2im_lanes(real *sum, const __global real *crow, const int tw0,
                                const int stride, const int OW, const int t0, const int t1)
{
    if (stride == 1) {
        for (int t = max(t0, -tw0); t < min(t1, OW - tw0); ++t)
            sum[t] += crow[tw0 + t];
        return;
    }
    const int first = tw0 + t0, last = tw0 + t1 - 1;   /* the columns' tw */
    if (last < 0)
        return;
    const int ow_end = min(OW, last / stride + 1);
    for (int ow = first <= 0 ? 0 : (first + stride - 1) / stride; ow < ow_end; ++ow)
        sum[ow * stride - tw0] += crow[ow];
}

/* col2im, one tap, every column of the work-item that col2im_block_tap does not sum. */
static inline void col2im_edges(real *sum, const __global real *crow, const int tw0,
                                const int stride, const int OW, const int nw, const int va,
                                const int vb)
{
    col2im_lanes(sum, crow, tw0, stride, OW, 0, va);
    col2im_lanes(sum, crow, tw0, stride, OW, vb, nw);
}

#if COL2IM_TW >= 16
/* col2im, one tap, a block of 16 columns (tw = tw0 of its first, >= 0): stride 1 adds 16
 * consecutive entries to acc; at stride 2 the tap reaches the block's even or odd columns, 8
 * consecutive entries.  The caller keeps acc, even and odd over the taps (registers, once
 * inlined) and stores them with col2im_block_sums. */
static inline void col2im_block_tap(real16 *acc, real8 *even, real8 *odd,
                                    const __global real *crow, const int tw, const int stride)
{
    if (stride == 1)
        *acc += vload16(0, crow + tw);
    else if (tw % 2 == 0)
        *even += vload8(0, crow + tw / 2);
    else
        *odd += vload8(0, crow + (tw + 1) / 2);
}

/* The block's 16 sums into sum[0..15]: acc at stride 1, even and odd interleaved at 2. */
static inline void col2im_block_sums(real *sum, const real16 acc, const real8 even,
                                     const real8 odd, const int stride)
{
    vstore16(stride == 1 ? acc : shuffle2(even, odd, UNFOLD_INTERLEAVE), 0, sum);
}
#endif
