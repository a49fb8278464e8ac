/* fft.cl: an FFT solver config's transforms as one program: the plane transforms
 * (fft2d_forward, fft2d_inverse) and, with FFT_SMALL, the weights' separable DFTs
 * (dft_small_forward, dft_small_inverse), which read the same defines.  One program, not one a
 * kernel: on PoCL every program load, a cache hit included, costs a fixed 25-30 ms (it
 * preprocesses the OpenCL headers to find the entry; BENCHMARKS.md "Session 65").  The products
 * (cgemm.cl) stay a program of their own: tuning varies their tunables apart from these, and in
 * one program the transforms would be compiled again for each.  The kernels' banners give their
 * arguments.
 *
 * Defines read: FFT_SMALL, and those of the files included.
 */
#include "fft2d_forward.cl"
#include "fft2d_inverse.cl"
#if FFT_SMALL
#include "dft_small_forward.cl"
#include "dft_small_inverse.cl"
#endif
