/* epilogue.cl: the core's epilogue pass, for the part of an epilogue a solver did not fuse.
 *
 *   y[i] = the epilogue's stages CS_EPI_FIRST.. of t[t_off + i]   (convsolve_epilogue.h)
 *
 * over an output of `rows` planes of `plane` elements, plane r being channel r % channels:
 * channels-first (NCW, NCHW, NCDHW) rows = N * channels, plane = the product of the spatial
 * sizes (a weight gradient: rows = K * C / G, plane = the filter's); channels-last (NWC, NHWC,
 * NDHWC) every element a plane of its own (plane = 1, CS_PASS_VW = 1), so element i has
 * channel i % channels.  t is
 * the convolution (or what a solver fused of the epilogue) and may be y itself (in place) when
 * neither blend nor residual is left to apply; z and y_prior are read at y's offsets.  Each
 * work-item takes CS_PASS_VW consecutive elements of one plane.
 *
 * Kernel:
 *   cs_epilogue_pass(const global real *t, int t_off, global real *y, int plane, int channels,
 *                    int runs, CS_EPILOGUE_PARAMS)
 *   global size = (rows * runs), runs = CS_DIV_UP(plane, CS_PASS_VW); local size = any
 *
 * Defines read: CS_PASS_VW; the epilogue's (convsolve_epilogue.h); CS_PRECISION via convsolve.h.
 */
#include "convsolve_epilogue.h"

#ifndef CS_PASS_VW
#define CS_PASS_VW 8 /* elements per work-item: 8 (a vector) or 1 */
#endif
#if CS_PASS_VW == 8
typedef float8 cs_pass_vec;
#define CS_PASS_LOAD(p, at) vload8(0, (p) + (at))
#define CS_PASS_STORE(v, p) vstore8(v, 0, p)
#elif CS_PASS_VW == 1
typedef real cs_pass_vec;
#define CS_PASS_LOAD(p, at) ((p)[at])
#define CS_PASS_STORE(v, p) (*(p) = (v))
#else
#error "epilogue.cl: CS_PASS_VW must be 8 or 1"
#endif

__kernel void cs_epilogue_pass(const __global real *t, const int t_off, __global real *y,
                               const int plane, const int channels, const int runs,
                               CS_EPILOGUE_PARAMS)
{
    const int row = get_global_id(0) / runs;
    const int run = (get_global_id(0) % runs) * CS_PASS_VW;
    const int k = row % channels;
    const size_t at = (size_t)row * plane + run;
    cs_epilogue e = CS_EPILOGUE_INIT(0, 0);
    const bool read_t = CS_EPI_FIRST > 0 || cs_alpha != 0.0f; /* alpha == 0: t is not read */
    if (run + CS_PASS_VW <= plane) {
        cs_pass_vec v = read_t ? CS_PASS_LOAD(t + t_off, at) : (cs_pass_vec)0;
        CS_EPILOGUE(cs_pass_vec, CS_PASS_LOAD, e, v, k, y, at);
        CS_PASS_STORE(v, y + at);
    } else {
        for (int i = run; i < plane; ++i) {
            real v = read_t ? t[t_off + at + i - run] : (real)0;
            CS_EPILOGUE(real, CS_LOAD1, e, v, k, y, at + i - run);
            y[at + i - run] = v;
        }
    }
}
