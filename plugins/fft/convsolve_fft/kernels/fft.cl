/* fft.cl: an FFT solver config's kernels as one program: the plane transforms (fft2d_forward,
 * fft2d_inverse), with FFT_SMALL the weights' separable DFTs (dft_small_forward,
 * dft_small_inverse), and the per-frequency products (cgemm).  One program a config, not one a
 * kernel: on PoCL every program load, a cache hit included, costs a fixed 25-30 ms (it
 * preprocesses the OpenCL headers to find the entry), so a config's first use paid it three to
 * five times (BENCHMARKS.md "Session 65").  The kernels' banners give their arguments.
 *
 * Defines read: FFT_SMALL, and those of the files included.
 */
#include "fft2d_forward.cl"
#include "fft2d_inverse.cl"
#if FFT_SMALL
#include "dft_small_forward.cl"
#include "dft_small_inverse.cl"
#endif
#include "cgemm.cl"
