/* winograd_filter_lanes.cl: the filter transforms' lane vectors (wino_filter.cl,
 * wino_filter_out.cl): FL filters a work-item, the GEMM's VW, beside the data transforms' TT
 * lanes in the same program.  Defines fvec (FL floats), FVLOAD and FVSTORE, and the transforms
 * over fvec as wino_g_fl and wino_gt_fl (winograd_transforms.cl included a second time, under
 * those names), after which WINO_T and WINO_FN are winograd_common.cl's again.
 *
 * Defines read: FL (1, 2, 4, 8 or 16; default VW).
 */
#ifndef WINOGRAD_FILTER_LANES_CL
#define WINOGRAD_FILTER_LANES_CL
#include "winograd_common.cl"

#ifndef FL
#define FL VW /* filters per work-item of the filter transforms */
#endif
#if FL == 1
typedef float fvec;
#define FVLOAD(p) (*(p))
#define FVSTORE(v, p) (*(p) = (v))
#elif FL == 2 || FL == 4 || FL == 8 || FL == 16
typedef WINO_CAT(float, FL) fvec;
#define FVLOAD(p) WINO_CAT(vload, FL)(0, p)
#define FVSTORE(v, p) WINO_CAT(vstore, FL)(v, 0, p)
#else
#error "winograd_filter_lanes.cl: FL must be 1, 2, 4, 8 or 16"
#endif

#undef WINO_T
#undef WINO_FN
#define WINO_T fvec
#define WINO_FN(name) WINO_CAT(name, _fl)
#include "winograd_transforms.cl"
#undef WINO_T
#undef WINO_FN
#define WINO_T wvec
#define WINO_FN(name) name
#endif
