/* wino_forward.cl: forward and backward-data's kernels of Winograd F(m x m, 3 x 3) as one
 * program: the filter transform (wino_filter, FL lanes), the input transform (wino_input), the
 * output transform with the epilogue (wino_output) and the GEMM of the transformed domain, the
 * local-memory one with WINO_GEMM_LOCAL (wino_gemm_local), else the vector one (wino_gemm).
 *
 * One program a config, not one a kernel: on PoCL a program load, a cache hit included, costs
 * a fixed 25-30 ms (the OpenCL headers are preprocessed to find the entry) and the time to read
 * the program's code.  In a fresh process F(4x4) with 16 lanes loaded as one program in 98-125
 * ms where its four programs took 167; with TT 2, three of the kernels in 37 ms where they took
 * 88-91 (2-vCPU AMD EPYC, Zen 4, PoCL 3.1 `pthread-skylake-avx512`; README "Kernels").  The
 * kernels' banners give their arguments and ranges.
 *
 * Defines read: WINO_GEMM_LOCAL, and those of the files included.
 */
#include "wino_filter.cl"
#include "wino_input.cl"
#include "wino_output.cl"
#if WINO_GEMM_LOCAL
#include "wino_gemm_local.cl"
#else
#include "wino_gemm.cl"
#endif
