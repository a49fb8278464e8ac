/* broken.cl: a kernel with a planted syntax error, for build-failure tests. */
__kernel void broken(__global float *a) { a[0] = undeclared_name; }
