/* faults.cl: kernels that plant faults into otherwise correct test solvers.
 * scribble: writes one 32-bit word per work-item into the workspace.
 * perturb:  adds `amount` to y[0], so repeated runs differ. */
__kernel void scribble(__global uint *scratch) { scratch[get_global_id(0)] = 0x12345678u; }
__kernel void perturb(__global float *y, const float amount) { y[0] += amount; }
