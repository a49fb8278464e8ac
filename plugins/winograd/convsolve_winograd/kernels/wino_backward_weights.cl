/* wino_backward_weights.cl: backward-weights' kernels of Winograd F(m x m, 3 x 3) as one
 * program (wino_forward.cl says why): the input transform, tile-major (wino_input), the
 * output-gradient transform (wino_grad), the GEMM summing over the tiles, the local-memory one
 * with WINO_GEMM_LOCAL (wino_gemm_wrw_local, WRW = 1), else the vector one (wino_gemm_wrw), and
 * the inverse filter transform with the epilogue (wino_filter_out, FL lanes).
 *
 * Defines read: WINO_GEMM_LOCAL, and those of the files included.
 */
#include "wino_input.cl"
#include "wino_grad.cl"
#include "wino_filter_out.cl"
#if WINO_GEMM_LOCAL
#include "wino_gemm_local.cl"
#else
#include "wino_gemm_wrw.cl"
#endif
