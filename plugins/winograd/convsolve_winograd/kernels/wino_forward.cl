/* wino_forward.cl: the kernels of forward and backward-data's Winograd F(m x m, 3 x 3) that
 * read TT, as one program: the input transform (wino_input), the output transform with the
 * epilogue (wino_output) and the GEMM of the transformed domain, the local-memory one with
 * WINO_GEMM_LOCAL (wino_gemm_local), else the vector one (wino_gemm).  The filter transform
 * (wino_filter.cl), whose lanes are the GEMM's VW, is a program of its own.
 *
 * One program, not one a kernel: on PoCL every program build, a cache hit included, first
 * preprocesses the OpenCL headers (about 30 ms), and these three in one load in about 37 ms
 * where they took 88-91 (and build from source in 670 ms instead of 930-965; 2-vCPU AMD EPYC,
 * Zen 4, PoCL 3.1 `pthread-skylake-avx512`, README "Kernels").  The kernels' banners give
 * their arguments and ranges.
 *
 * Defines read: WINO_GEMM_LOCAL, and those of the files included.
 */
#include "wino_input.cl"
#include "wino_output.cl"
#if WINO_GEMM_LOCAL
#include "wino_gemm_local.cl"
#else
#include "wino_gemm.cl"
#endif
