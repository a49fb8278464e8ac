/* tunable.cl: kernels of cs_tunable's fake tunable solver (tests only).
 *   spin:  SPIN iterations of dependent arithmetic per work-item, writing nothing (in practice):
 *          the config's cost, so that configs have known relative times
 *   spoil: y[0] += 1, the planted fault of a config whose output is wrong
 */
#ifndef SPIN
#define SPIN 0 /* iterations of busy work per work-item */
#endif

__kernel void spin(__global float *y)
{
    float acc = (float)get_global_id(0);
    for (int i = 0; i < SPIN; ++i)
        acc = acc * 0.999f + 1.0f;
    if (acc == -1.0f)   /* never true: keeps the loop */
        y[0] = acc;
}

__kernel void spoil(__global float *y)
{
    y[0] += 1.0f;
}
