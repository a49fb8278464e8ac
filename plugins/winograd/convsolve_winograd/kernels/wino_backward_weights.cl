/* wino_backward_weights.cl: the kernels of backward-weights' Winograd F(m x m, 3 x 3) that read
 * TT, as one program (wino_forward.cl says why): the input transform, tile-major (wino_input),
 * the output-gradient transform (wino_grad) and the GEMM summing over the tiles, the local-
 * memory one with WINO_GEMM_LOCAL (wino_gemm_wrw_local, WRW = 1), else the vector one
 * (wino_gemm_wrw).  The inverse filter transform (wino_filter_out.cl), whose lanes are the
 * GEMM's VW, is a program of its own.
 *
 * Defines read: WINO_GEMM_LOCAL, and those of the files included.
 */
#include "wino_input.cl"
#include "wino_grad.cl"
#if WINO_GEMM_LOCAL
#include "wino_gemm_local.cl"
#else
#include "wino_gemm_wrw.cl"
#endif
