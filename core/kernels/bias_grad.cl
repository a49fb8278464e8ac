/* bias_grad.cl: backward-bias, db[k] = alpha * sum over n, h, w of dy[n][k][h][w] + beta * db[k],
 * as a deterministic reduction in a fixed order (convsolve.engine.bias_grad launches it).
 *
 * One pass reduces, per channel k, `units` units of floats (a unit: CS_BIAS_VECTOR floats when
 * CS_BIAS_STRIDED, else one float): runs of `run` units, run s of channel k starting at unit
 * (s * channels + k) * run of in + in_off (dy: N runs of H * W floats; a later pass: the previous
 * pass's partial sums, one run per channel).  Each channel's units fall into `chunks` chunks of
 * `team` work-items with ITEMS loads of CS_BIAS_VECTOR floats each; a work-group of GROUP
 * work-items takes chunk c of GROUP / team consecutive channels (team < GROUP: small channels,
 * chunks == 1) and writes each chunk's sum to out[out_off + k * chunks + c], or, in the pass
 * with one chunk per channel (`final`), out[k] = alpha * sum + beta * out[k] (alpha == 0,
 * beta == 0: that operand not read).
 *
 * CS_BIAS_STRIDED (a GPU's coalesced loads): work-item t loads units t, t + team, ... of its
 * chunk, aligned vectors (CS_BIAS_VECTOR divides the run in floats, in + in_off is aligned).
 * Else (a CPU's long contiguous runs): work-item t loads floats [t * ITEMS * VECTOR, ...) of its
 * chunk as unaligned vectors, straight through when they lie in one run; else a vector that
 * crosses a run's end comes from two loads blended.  Each work-item walks across run ends with
 * one division; its loads go round CS_BIAS_ACCS accumulators (ACCS loads in flight) and stop
 * at the channel's end.  The accumulators' lanes
 * are then summed as a balanced tree, the team's sums as one in local memory, the chunks by the
 * next pass likewise: each float is added in an order fixed by the sizes alone (bitwise
 * reproducible, whatever the scheduling), only ITEMS / ACCS of them one after the other, the
 * error growing with ITEMS / ACCS + log2(N * H * W) rather than N * H * W.
 *
 * Kernel:
 *   cs_bias_sum(const global float *in, int in_off, int run, int channels, int units,
 *               int chunks, int team, global float *out, int out_off, int final, float alpha,
 *               float beta)
 *   global size = (ceil(channels / (GROUP / team)) * chunks * GROUP), local size = (GROUP)
 *
 * Defines read (convsolve.engine.bias_grad.Config): CS_BIAS_GROUP (a power of two), CS_BIAS_ITEMS,
 * CS_BIAS_ACCS (a power of two dividing ITEMS), CS_BIAS_VECTOR (1, 2, 4, 8 or 16; 16 at most
 * when not strided), CS_BIAS_STRIDED (0 or 1).
 */
#define CS_BIAS_PASTE(a, b) a##b
#define CS_BIAS_CAT(a, b) CS_BIAS_PASTE(a, b)
#define CS_BIAS_VN(name) CS_BIAS_CAT(name, CS_BIAS_VECTOR) /* float -> float4 */
#if CS_BIAS_VECTOR == 1
typedef float cs_bias_vec;
#define CS_BIAS_VLOAD(p) (*(p))
#define CS_BIAS_VSTORE(v, i, p) ((p)[i] = (v))
#else
typedef CS_BIAS_VN(float) cs_bias_vec;
#define CS_BIAS_VLOAD(p) CS_BIAS_VN(vload)(0, p)
#define CS_BIAS_VSTORE(v, i, p) CS_BIAS_VN(vstore)(v, i, p)
#endif
#if CS_BIAS_STRIDED
#define CS_BIAS_UNIT CS_BIAS_VECTOR /* floats per unit */
#else
#define CS_BIAS_UNIT 1
__constant int cs_bias_lane_ids[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
#endif

/* The vector at p, r units into a run of `run` units whose next run starts `wrap` units after
 * its end, with `left` units left in the channel (zeros past them).  Strided: an aligned vector,
 * a unit.  Else: unaligned, from two loads blended across a run's end, float by float in runs
 * shorter than a vector and at the channel's end. */
inline cs_bias_vec cs_bias_load(const __global float *p, int r, const int run, const int left,
                                const size_t wrap)
{
#if CS_BIAS_STRIDED
    return *(const __global cs_bias_vec *)p;
#else
    if (left >= CS_BIAS_VECTOR && r + CS_BIAS_VECTOR <= run)
        return CS_BIAS_VLOAD(p);
    if (left >= CS_BIAS_VECTOR && run >= CS_BIAS_VECTOR)
        return select(CS_BIAS_VLOAD(p), CS_BIAS_VLOAD(p + wrap),
                      CS_BIAS_VLOAD(cs_bias_lane_ids) >= run - r);
    float lanes[CS_BIAS_VECTOR];
    for (int i = 0; i < CS_BIAS_VECTOR; ++i, ++p, ++r) {
        if (r == run) {
            r = 0;
            p += wrap;
        }
        lanes[i] = i < left ? *p : 0.0f;
    }
    return CS_BIAS_VLOAD(lanes);
#endif
}

__kernel __attribute__((reqd_work_group_size(CS_BIAS_GROUP, 1, 1)))
void cs_bias_sum(const __global float *in, const int in_off, const int run, const int channels,
                 const int units, const int chunks, const int team, __global float *out,
                 const int out_off, const int final, const float alpha, const float beta)
{
    const int g = get_group_id(0), c = g % chunks;
    const int k = g / chunks * (CS_BIAS_GROUP / team) + get_local_id(0) / team;
    const int t = get_local_id(0) % team, first = get_local_id(0) - t;
    /* a load covers `per` units; a team's work-items start a unit apart (strided) or ITEMS */
    const int per = CS_BIAS_STRIDED ? 1 : CS_BIAS_VECTOR, step = CS_BIAS_STRIDED ? team : per;
    int u = (c * team * CS_BIAS_ITEMS + (CS_BIAS_STRIDED ? t : t * CS_BIAS_ITEMS)) * per;
    /* unit u of channel k lies at unit `at`, r units into its run; a step moves all three */
    int r = u % run;
    size_t at = ((size_t)(u / run) * channels + k) * run + r;
    const int dr = step % run, end = k < channels ? units : 0;
    const size_t wrap = (size_t)(channels - 1) * run;
    const size_t jump = (size_t)(step / run) * (wrap + run) + dr;
    cs_bias_vec acc[CS_BIAS_ACCS];
    for (int a = 0; a < CS_BIAS_ACCS; ++a)
        acc[a] = 0.0f;
#if !CS_BIAS_STRIDED
    if (u + CS_BIAS_ITEMS * CS_BIAS_VECTOR <= min(end, u - r + run)) {   /* within one run */
        for (int j = 0; j < CS_BIAS_ITEMS; j += CS_BIAS_ACCS)
#pragma unroll
            for (int a = 0; a < CS_BIAS_ACCS; ++a)
                acc[a] += CS_BIAS_VLOAD(in + in_off + at + (j + a) * CS_BIAS_VECTOR);
        u = end;
    }
#endif
    for (int j = 0; j < CS_BIAS_ITEMS && u < end; j += CS_BIAS_ACCS) {
#pragma unroll
        for (int a = 0; a < CS_BIAS_ACCS; ++a) {
            if (u < end)
                acc[a] += cs_bias_load(in + in_off + at * CS_BIAS_UNIT, r, run, end - u, wrap);
            u += step;
            r += dr;
            at += jump;
            if (r >= run) {
                r -= run;
                at += wrap;
            }
        }
    }
    /* the accumulators' lanes, then the team's sums, as balanced trees */
    float lanes[CS_BIAS_ACCS * CS_BIAS_VECTOR];
    for (int a = 0; a < CS_BIAS_ACCS; ++a)
        CS_BIAS_VSTORE(acc[a], a, lanes);
#pragma unroll
    for (int span = CS_BIAS_ACCS * CS_BIAS_VECTOR / 2; span > 0; span >>= 1)
        for (int i = 0; i < span; ++i)
            lanes[i] += lanes[i + span];
    __local float part[CS_BIAS_GROUP];
    part[get_local_id(0)] = lanes[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int span = team / 2; span > 0; span >>= 1) {
        if (t < span)
            part[first + t] += part[first + t + span];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (t == 0 && k < channels) {
        const int id = out_off + (final ? k : k * chunks + c);
        float sum = final && alpha == 0.0f ? 0.0f : (final ? alpha : 1.0f) * part[first];
        if (final && beta != 0.0f)
            sum += beta * out[id];
        out[id] = sum;
    }
}
