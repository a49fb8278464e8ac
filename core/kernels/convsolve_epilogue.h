/* convsolve_epilogue.h: the epilogue of a convolution's output, one code for fused solvers and
 * for the core's own pass (epilogue.cl), so that fused and unfused results are the same
 * arithmetic.  Forward, in this order (stages 0 to 5):
 *
 *   y = act(alpha * conv * scale[k] + bias[k] + z_scale * z; a, b, g) + beta * y_prior
 *
 * Backward directions use alpha and blend only.  A coefficient of 0 means its operand is never
 * read (alpha == 0: the convolution's value is not used; z_scale == 0: z; beta == 0: y_prior).
 * Activations are MIOpen's table (convsolve.epilogue.ACTIVATIONS); NaN propagates through every
 * one, and relu, clipped and leaky relu never multiply by 0 (relu(-inf) = 0, not NaN).
 *
 * Use: put CS_EPILOGUE_PARAMS in the kernel's parameters (convsolve.epilogue.EpilogueArgs gives
 * them in order: alpha, beta, z_scale, a, b, g as floats, then the scale, bias and z buffers,
 * NULL where absent), make `cs_epilogue e = CS_EPILOGUE_INIT(channel0, z_offset);` and apply
 * CS_EPILOGUE(T, LOAD, e, v, k, y, at) to each output value v before storing it: T is its type
 * (real or a vector of real), k its channel (vectors run along one channel's pixels), `at` its
 * element offset in the output y (and in z, which shares y's layout, and may be y itself: read
 * z[at] and y[at] in the work-item that then writes y[at]), LOAD(p, at) a load of T at p + at.
 * Without CS_EPI (a bare problem) CS_EPILOGUE does nothing, so one kernel serves both; kernels
 * that store one value at a time take CS_EPI_ARGS, CS_EPI_VALUES and CS_EPI_STORE (below).
 *
 * Defines read (convsolve.Epilogue.defines()): CS_EPI (0: no epilogue), CS_EPI_SCALE,
 * CS_EPI_BIAS, CS_EPI_RESIDUAL, CS_EPI_BLEND (0 or 1), CS_EPI_ACT (MIOpen's activation mode),
 * CS_EPI_FIRST (the first stage applied here: the stages before it were applied already).
 */
#ifndef CONVSOLVE_EPILOGUE_H
#define CONVSOLVE_EPILOGUE_H
#include "convsolve.h"

#ifndef CS_EPI
#define CS_EPI 0 /* 1: the output carries an epilogue */
#endif
#ifndef CS_EPI_SCALE
#define CS_EPI_SCALE 0 /* 1: times scale[k] */
#endif
#ifndef CS_EPI_BIAS
#define CS_EPI_BIAS 0 /* 1: plus bias[k] */
#endif
#ifndef CS_EPI_RESIDUAL
#define CS_EPI_RESIDUAL 0 /* 1: plus z_scale * z */
#endif
#ifndef CS_EPI_ACT
#define CS_EPI_ACT 0 /* MIOpen's activation mode, 0 (pass-through) to 9 (elu) */
#endif
#ifndef CS_EPI_BLEND
#define CS_EPI_BLEND 0 /* 1: plus beta * y_prior */
#endif
#ifndef CS_EPI_FIRST
#define CS_EPI_FIRST 0 /* first stage applied: 0 alpha, 1 scale, 2 bias, 3 residual, 4 act, 5 blend */
#endif

#define CS_EPILOGUE_PARAMS                                                                \
    const float cs_alpha, const float cs_beta, const float cs_z_scale, const float cs_act_a, \
    const float cs_act_b, const float cs_act_g, const __global real *cs_scale,            \
    const __global real *cs_bias, const __global real *cs_z

/* The values, and where this launch's output starts: channel of its row 0 (GEMM-like kernels
 * whose rows are channels) and z's offset (z advanced as the output is). */
typedef struct {
    float alpha, beta, z_scale, a, b, g;
    const __global real *scale, *bias, *z;
    int chan;
} cs_epilogue;
#define CS_EPILOGUE_INIT(chan0, z_off)                                                    \
    {cs_alpha, cs_beta, cs_z_scale, cs_act_a, cs_act_b, cs_act_g, cs_scale, cs_bias,       \
     CS_EPI_RESIDUAL ? cs_z + (z_off) : cs_z, (chan0)}

/* v = act(v) for v of type T (real or a vector of real), parameters e.a, e.b, e.g. */
#if CS_EPI_ACT == 0 /* pass-through */
#define CS_ACTIVATE(T, e, v)
#elif CS_EPI_ACT == 1 /* logistic */
#define CS_ACTIVATE(T, e, v) v = 1.0f / (1.0f + exp(-(v)))
#elif CS_EPI_ACT == 2 /* tanh */
#define CS_ACTIVATE(T, e, v) v = (e).b * tanh((e).a * (v))
#elif CS_EPI_ACT == 3 /* relu */
#define CS_ACTIVATE(T, e, v) v = select(v, (T)0, (v) <= 0.0f) /* NaN > 0 is false: kept */
#elif CS_EPI_ACT == 4 /* softrelu */
#define CS_ACTIVATE(T, e, v) v = select(log1p(exp(v)), (v) + log1p(exp(-(v))), (v) > 0.0f)
#elif CS_EPI_ACT == 5 /* abs */
#define CS_ACTIVATE(T, e, v) v = fabs(v)
#elif CS_EPI_ACT == 6 /* power: 0 where the base is 0, as MIOpen has it */
#define CS_ACTIVATE(T, e, v)                                                              \
    {                                                                                     \
        const T base_ = (e).a + (e).b * (v);                                              \
        v = select(pow(base_, (T)((e).g)), (T)0, base_ == (T)0);                          \
    }
#elif CS_EPI_ACT == 7 /* clipped relu */
#define CS_ACTIVATE(T, e, v) v = select(fmin(fmax(v, 0.0f), (e).a), v, isnan(v))
#elif CS_EPI_ACT == 8 /* leaky relu: a == 0 is relu, without 0 * -inf */
#define CS_ACTIVATE(T, e, v) v = select(v, (e).a != 0.0f ? (e).a * (v) : (T)0, (v) <= 0.0f)
#elif CS_EPI_ACT == 9 /* elu */
#define CS_ACTIVATE(T, e, v) v = select(v, (e).a * expm1(v), (v) <= 0.0f)
#else
#error "convsolve_epilogue.h: CS_EPI_ACT must be 0 to 9"
#endif

/* v = the epilogue's stages CS_EPI_FIRST.. of v, the value(s) at channel k and element `at`;
 * nothing without CS_EPI. */
#define CS_EPILOGUE(T, LOAD, e, v, k, y, at)                                              \
    do {                                                                                  \
        if (!CS_EPI)                                                                      \
            break;                                                                        \
        if (CS_EPI_FIRST <= 0)                                                            \
            v = (e).alpha != 0.0f ? (e).alpha * (v) : (T)0;                               \
        if (CS_EPI_SCALE && CS_EPI_FIRST <= 1)                                            \
            v *= (e).scale[k];                                                            \
        if (CS_EPI_BIAS && CS_EPI_FIRST <= 2)                                             \
            v += (e).bias[k];                                                             \
        if (CS_EPI_RESIDUAL && CS_EPI_FIRST <= 3 && (e).z_scale != 0.0f)                  \
            v += (e).z_scale * LOAD((e).z, at);                                           \
        if (CS_EPI_FIRST <= 4) {                                                          \
            CS_ACTIVATE(T, e, v);                                                         \
        }                                                                                 \
        if (CS_EPI_BLEND && (e).beta != 0.0f)                                             \
            v += (e).beta * LOAD(y, at);                                                  \
    } while (0)

/* LOAD for scalars. */
#define CS_LOAD1(p, at) ((p)[at])

/* For a kernel built with or without an epilogue: CS_EPI_ARGS after its last parameter (the
 * values, CS_EPILOGUE_PARAMS), CS_EPI_VALUES(e, chan0) in its body (the values as `e`, output
 * row 0 being channel chan0), CS_EPI_STORE(e, y, at, k, v): y[at] = the epilogue of v, the
 * value at channel k (z and the prior y read at `at` first: z may be y itself).  Bare: nothing,
 * nothing and a plain store, so the bare kernel is what it would be without epilogues. */
#if CS_EPI
#define CS_EPI_ARGS , CS_EPILOGUE_PARAMS
#define CS_EPI_VALUES(e, chan0) const cs_epilogue e = CS_EPILOGUE_INIT(chan0, 0)
#define CS_EPI_STORE(e, y, at, k, v)                                                      \
    do {                                                                                  \
        const size_t at_ = (at);                                                          \
        real v_ = (v);                                                                    \
        CS_EPILOGUE(real, CS_LOAD1, e, v_, k, y, at_);                                    \
        (y)[at_] = v_;                                                                    \
    } while (0)
#else
#define CS_EPI_ARGS
#define CS_EPI_VALUES(e, chan0)
#define CS_EPI_STORE(e, y, at, k, v) ((y)[at] = (real)(v))
#endif

#endif /* CONVSOLVE_EPILOGUE_H */
