/* nd_common.cl: the sizes of a problem of spatial rank 1 to 3 as kernel arguments, shared by
 * naive_nd.cl and depthwise_nhwc.cl.  Every problem is 3-D there: a 1-D or 2-D one has depth
 * (and height) 1, with filter size 1, pad 0, stride and dilation 1 (plan.nd_sizes passes them).
 *
 * nd_window: backward-data's gather of an output position per tap.
 *
 * Defines read: none.
 */
#ifndef ND_COMMON_CL
#define ND_COMMON_CL

/* Sizes, pads (the near side), strides and dilations, outermost dim first. */
#define ND_SIZES                                                                             \
    const int N, const int C, const int K, const int G, const int D, const int H, const int W, \
    const int OD, const int OH, const int OW, const int Z, const int R, const int S,          \
    const int PAD_F, const int PAD_T, const int PAD_L, const int STRIDE_D, const int STRIDE_H, \
    const int STRIDE_W, const int DIL_D, const int DIL_H, const int DIL_W

/* The output position o whose window puts tap `tap` on input position i (o * stride - pad +
 * tap * dil == i), or -1 where no output position does: the gathers of backward-data. */
inline int nd_window(int i, int tap, int pad, int stride, int dil, int out)
{
    const int t = i + pad - tap * dil; /* = o * stride */
    return (t >= 0 && t % stride == 0 && t / stride < out) ? t / stride : -1;
}

#endif /* ND_COMMON_CL */
