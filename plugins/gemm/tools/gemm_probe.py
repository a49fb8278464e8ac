#!/usr/bin/env python3
"""Measure gemm.cl configurations: GFLOP/s from profiling events, correctness against numpy.

Standalone (needs only pyopencl and numpy); builds ../convsolve_gemm/kernels/gemm.cl (which
includes gemm_common.cl and one of gemm_cpu.cl, gemm_local.cl) with -I of its own folder and of
core/kernels and the given -D options, exactly as the solver will.

Examples:
    python3 gemm_probe.py --peak                                  # FMA peak of the device
    python3 gemm_probe.py -c "TM=6 TN=16 VW=8 WGD_M=4" --size 1024 # one config at 1024^3
    python3 gemm_probe.py -c "..." -c "..." --size 1024 --rounds 3 # several configs, interleaved
    python3 gemm_probe.py -c "USE_LOCAL=1 ..." --check-suite       # odd sizes, transposes, batch
    python3 gemm_probe.py --mnk 256 196 1024 --batch 8 --shared-a --paired-peak --rounds 3 \
        -c "KERNEL=/tmp/gemm_old.cl" -c ""                         # A/B against an older gemm.cl
"""
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # idle BLAS threads spin on the 2 cores
import numpy as np
import pyopencl as cl

HERE = os.path.dirname(os.path.abspath(__file__))
GEMM_CL = os.path.join(HERE, "..", "convsolve_gemm", "kernels", "gemm.cl")
IM2COL_CL = os.path.join(HERE, "..", "convsolve_gemm", "kernels", "im2col.cl")
COL2IM_CL = os.path.join(HERE, "..", "convsolve_gemm", "kernels", "col2im.cl")
INCLUDE = os.path.normpath(os.path.join(HERE, "..", "..", "..", "core", "kernels"))
PEAK_CL = os.path.join(os.path.dirname(INCLUDE), "bench", "kernels", "peak.cl")

# Defaults of gemm.cl (the #ifndef values in gemm_common.cl), needed here only for launch sizes.
CL_DEFAULTS = {"WGD_M": 1, "WGD_N": 1, "TM": 6, "TN": 16, "MR": 16, "NR": 1}


def ceil_div(a, b):
    """The smallest integer >= a / b (convsolve.ceil_div; the probe does not import convsolve)."""
    return -(-a // b)


def pick_device(want):
    """First device whose '<platform> <device>' contains `want` and that can build a kernel;
    a simulator (Oclgrind) only when `want` names it, as convsolve picks its default device."""
    for plat in cl.get_platforms():
        for dev in plat.get_devices():
            name = f"{plat.name} {dev.name}".lower()
            if want.lower() not in name or ("oclgrind" in name and "oclgrind" not in want.lower()):
                continue
            ctx = cl.Context([dev])
            try:
                cl.Program(ctx, "__kernel void k(__global float *x) { x[0] = 1.0f; }").build()
            except cl.Error as exc:
                print(f"skip {dev.name!r}: cannot build ({exc})", file=sys.stderr)
                continue
            return ctx, dev
    sys.exit(f"gemm_probe: no buildable OpenCL device matches {want!r}")


def parse_defines(text):
    """'TM=6 TN=16,VW=8' -> {'TM': 6, ...}; values are ints or identifiers."""
    out = {}
    for item in text.replace(",", " ").split():
        name, _, value = item.partition("=")
        out[name] = int(value) if value.lstrip("-").isdigit() else (value or 1)
    return out


def build(ctx, path, defines):
    """Build `path` with -D defines; a KERNEL=<file> entry builds that file instead (A/B runs)."""
    defines = dict(defines)
    path = defines.pop("KERNEL", path)
    folder = os.path.dirname(os.path.abspath(path))   # its own folder serves its includes
    opts = [f"-I{folder}", f"-I{INCLUDE}"] + [f"-D{k}={v}" for k, v in sorted(defines.items())]
    t0 = time.perf_counter()
    with open(path) as f:
        prg = cl.Program(ctx, f.read()).build(options=opts)
    return prg, time.perf_counter() - t0


def event_times(queue, launch, warmup, runs):
    """Median and min seconds of `runs` launches after `warmup`, from profiling events."""
    for _ in range(warmup):
        launch()
    queue.finish()
    times = []
    for _ in range(runs):
        ev = launch()
        ev.wait()
        times.append((ev.profile.end - ev.profile.start) * 1e-9)
    return statistics.median(times), min(times)


def paired_times(queue, launch, peak_launch, wake_launch, warmup, runs):
    """Median GEMM seconds of `runs` launches, each right after one FMA-peak launch, and the
    (GEMM, peak) seconds of every pair: the host takes CPU time in bursts of a few ms, so a
    ratio within a pair is steadier than a ratio of separate medians. A longer peak launch goes
    first and is not timed: after the host waits, PoCL's second thread (an idle vCPU) takes
    1-3 ms to start, and a 0.7 ms peak launch then reads about half the peak."""
    for _ in range(warmup):
        launch()
    queue.finish()
    pairs = []
    for _ in range(runs):
        wake_launch()
        pk, ev = peak_launch(), launch()
        ev.wait()
        pairs.append(tuple((e.profile.end - e.profile.start) * 1e-9 for e in (ev, pk)))
    return statistics.median(t for t, _ in pairs), pairs


# {{{ noise control: the 2 cores are shared

def cpu_busy(interval=0.25):
    """Fraction of the machine's CPU time spent busy (by anyone) over `interval` seconds."""
    def sample():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v), v[3] + v[4]  # total, idle + iowait
    t0, i0 = sample()
    time.sleep(interval)
    t1, i1 = sample()
    return 1.0 - (i1 - i0) / max(1, t1 - t0)


def wait_quiet(max_wait):
    """Wait (up to max_wait s) until other processes leave the CPUs; True when they did."""
    if max_wait <= 0 or not os.path.exists("/proc/stat"):
        return True
    deadline = time.monotonic() + max_wait
    while time.monotonic() < deadline:
        if cpu_busy() < 0.08:
            return True
        time.sleep(0.5)
    return False

# }}}


# {{{ FMA peak

def peak_launcher(ctx, dev, queue, iters, vw=8, chains=12):
    """(launch, flops) for one configuration of core/kernels/peak.cl's cs_peak_fma."""
    prg, _ = build(ctx, PEAK_CL, {"PEAK_VW": vw, "PEAK_CHAINS": chains})
    knl = cl.Kernel(prg, "cs_peak_fma")
    nwi = 64 * dev.max_compute_units if dev.type & cl.device_type.CPU else 1 << 20
    out = cl.Buffer(ctx, cl.mem_flags.WRITE_ONLY, 4 * nwi * vw)   # PEAK_VW floats per work-item
    knl.set_args(out, np.int32(iters), np.float32(1.5))

    def launch(_keep=out):  # the default argument keeps the output buffer alive
        return cl.enqueue_nd_range_kernel(queue, knl, (nwi,), None)
    return launch, 2.0 * vw * chains * iters * nwi


def measure_peak(ctx, dev, queue, args):
    """Best GFLOP/s over a few (vector width, chains) of cs_peak_fma."""
    units = dev.max_compute_units
    best = 0.0
    for vw, chains in ((8, 8), (8, 12), (8, 14), (16, 6), (16, 7)):
        wait_quiet(args.quiet)
        launch, flops = peak_launcher(ctx, dev, queue, args.peak_iters, vw, chains)
        med, best_t = event_times(queue, launch, 2, args.runs)
        print(f"cs_peak_fma PEAK_VW={vw:2d} PEAK_CHAINS={chains:2d}: median {flops / med * 1e-9:8.1f}"
              f" GFLOP/s, best {flops / best_t * 1e-9:8.1f}")
        best = max(best, flops / med * 1e-9)
    print(f"peak (best median) {best:.1f} GFLOP/s on {dev.name!r}, {units} compute units")
    return best

# }}}


# {{{ GEMM

class Problem:
    """One batched GEMM with random data, leading dimensions padded by `pad`, offsets `off`."""

    def __init__(self, ctx, M, N, K, batch=1, ta=0, tb=0, pad=0, off=0, beta=0.0, seed=0,
                 shared_a=False):
        rng = np.random.default_rng(seed)
        self.M, self.N, self.K, self.batch, self.ta, self.tb = M, N, K, batch, ta, tb
        self.alpha, self.beta, self.off = 1.0 if beta == 0 else 0.75, beta, off
        ar, ac = (K, M) if ta else (M, K)
        br, bc = (N, K) if tb else (K, N)
        pa, pb, pc = pad if isinstance(pad, tuple) else (pad,) * 3
        self.lda, self.ldb, self.ldc = ac + pa, bc + pb, N + pc
        self.sa, self.sb, self.sc = ar * self.lda + off, br * self.ldb + off, M * self.ldc + off
        if shared_a:  # one A for the whole batch (stride 0), as the solvers pass the weights
            self.sa = 0
        self.a = rng.standard_normal((1 if shared_a else batch, ar, ac), dtype=np.float32)
        self.b = rng.standard_normal((batch, br, bc), dtype=np.float32)
        self.c0 = rng.standard_normal((batch, M, N), dtype=np.float32)
        mf = cl.mem_flags
        self.abuf = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=self._pack(
            self.a, self.lda, self.sa))
        self.bbuf = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=self._pack(
            self.b, self.ldb, self.sb))
        self.cinit = self._pack(self.c0, self.ldc, self.sc, fill=np.nan if beta == 0 else 0)
        self.cbuf = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=self.cinit)

    def _pack(self, x, ld, stride, fill=0.0):
        """Batch of matrices -> flat array with element offset `off`, row pitch ld, stride."""
        flat = np.full(len(x) * stride + self.off + (0 if stride else x.shape[1] * ld), fill,
                       dtype=np.float32)
        for i in range(len(x)):
            base = self.off + i * stride
            view = flat[base:base + x.shape[1] * ld].reshape(x.shape[1], ld)
            view[:, :x.shape[2]] = x[i]
        return flat

    def args(self):
        i32 = np.int32
        return (i32(self.M), i32(self.N), i32(self.K), np.float32(self.alpha),
                np.float32(self.beta), self.abuf, i32(self.off), i32(self.lda), i32(self.sa),
                self.bbuf, i32(self.off), i32(self.ldb), i32(self.sb),
                self.cbuf, i32(self.off), i32(self.ldc), i32(self.sc))

    def check(self, queue, launch):
        """Run once from the initial C; (max |C - ref| / (sqrt(K) * max|ref|), clobbered)."""
        cl.enqueue_copy(queue, self.cbuf, self.cinit)
        launch().wait()
        out = np.empty_like(self.cinit)
        cl.enqueue_copy(queue, out, self.cbuf).wait()
        worst = 0.0
        for i in range(self.batch):
            a = self.a[i % len(self.a)].T if self.ta else self.a[i % len(self.a)]
            b = self.b[i].T if self.tb else self.b[i]
            ref = self.alpha * (a.astype(np.float64) @ b.astype(np.float64))
            if self.beta:
                ref += self.beta * self.c0[i]
            base = self.off + i * self.sc
            got = out[base:base + self.M * self.ldc].reshape(self.M, self.ldc)[:, :self.N]
            scale = max(1.0, np.sqrt(self.K)) * max(1.0, float(np.abs(ref).max(initial=0)))
            worst = max(worst, float(np.abs(got - ref).max(initial=0)) / scale)
        # everything outside C (offsets, padding, other batches' gaps) must be untouched
        mask = np.ones(out.shape, bool)
        for i in range(self.batch):
            base = self.off + i * self.sc
            mask[base:base + self.M * self.ldc].reshape(self.M, self.ldc)[:, :self.N] = False
        clobbered = not np.array_equal(out[mask], self.cinit[mask], equal_nan=True)
        return worst, clobbered


def launch_sizes(defines, M, N, batch):
    d = dict(CL_DEFAULTS, **defines)
    if defines.get("USE_LOCAL") and "MR" not in defines:
        d["MR"] = 1  # gemm.cl: MR defaults to 1 with USE_LOCAL
    mwg, nwg = d["TM"] * d["WGD_M"] * d["MR"], d["TN"] * d["WGD_N"] * d["NR"]
    local = (d["WGD_N"], d["WGD_M"], 1)
    glob = (ceil_div(N, nwg) * d["WGD_N"], ceil_div(M, mwg) * d["WGD_M"], batch)
    return glob, local


def make_launch(queue, knl, prob, defines):
    glob, local = launch_sizes(defines, prob.M, prob.N, prob.batch)
    knl.set_args(*prob.args())
    return lambda: cl.enqueue_nd_range_kernel(queue, knl, glob, local)


def check_suite(ctx, queue, defines):
    """Odd sizes, both transposes, batch, offsets, padded ld, beta != 0. Returns failures."""
    cases = [(1, 1, 1), (7, 13, 5), (33, 65, 17), (100, 37, 129), (128, 128, 128),
             (129, 131, 67), (64, 49, 576), (250, 3, 1000), (5, 300, 2)]
    fails = 0
    for ta in (0, 1):
        for tb in (0, 1):
            d = dict(defines, TRANS_A=ta, TRANS_B=tb)
            prg, _ = build(ctx, GEMM_CL, d)
            knl = cl.Kernel(prg, "gemm")
            for n, (M, N, K) in enumerate(cases):
                beta = 0.0 if n % 2 else 0.5
                prob = Problem(ctx, M, N, K, batch=1 + n % 3, ta=ta, tb=tb, pad=n % 4,
                               off=3 * (n % 2), beta=beta, seed=n)
                err, clob = prob.check(queue, make_launch(queue, knl, prob, d))
                ok = err < 1e-5 and not clob
                fails += not ok
                if not ok or os.environ.get("VERBOSE"):
                    print(f"  TA={ta} TB={tb} M={M} N={N} K={K} batch={prob.batch} "
                          f"beta={beta}: err {err:.2e} clobbered={clob} "
                          f"{'ok' if ok else 'FAIL'}")
    print(f"check-suite {' '.join(f'{k}={v}' for k, v in sorted(defines.items()))}: "
          f"{'all ok' if not fails else f'{fails} FAILED'}")
    return fails

# }}}


# {{{ im2col / col2im

def ref_im2col(x, groups, R, S, stride, pad, dil, OH, OW):
    """numpy im2col.cl: [N * groups][Cg * R * S][OH * OW]."""
    N, C, H, W = x.shape
    cg = C // groups
    out = np.zeros((N, groups, cg, R, S, OH, OW), np.float32)
    for r in range(R):
        for s in range(S):
            ih = np.arange(OH) * stride[0] - pad[0] + r * dil[0]
            iw = np.arange(OW) * stride[1] - pad[1] + s * dil[1]
            mh, mw = (ih >= 0) & (ih < H), (iw >= 0) & (iw < W)
            sub = x[:, :, np.clip(ih, 0, H - 1)][:, :, :, np.clip(iw, 0, W - 1)]
            sub = sub * (mh[:, None] & mw[None, :])
            out[:, :, :, r, s] = sub.reshape(N, groups, cg, OH, OW)
    return out.reshape(N * groups, cg * R * S, OH * OW)


def ref_col2im(col, shape, groups, R, S, stride, pad, dil, OH, OW):
    """numpy col2im.cl (alpha = 1, beta = 0): the adjoint of ref_im2col."""
    N, C, H, W = shape
    cg = C // groups
    col = col.reshape(N, groups, cg, R, S, OH, OW)
    dx = np.zeros((N, groups, cg, H + 0, W), np.float64)
    for r in range(R):
        for s in range(S):
            for oh in range(OH):
                ih = oh * stride[0] - pad[0] + r * dil[0]
                if not 0 <= ih < H:
                    continue
                for ow in range(OW):
                    iw = ow * stride[1] - pad[1] + s * dil[1]
                    if 0 <= iw < W:
                        dx[:, :, :, ih, iw] += col[:, :, :, r, s, oh, ow]
    return dx.reshape(N, C, H, W)


def check_im2col(ctx, queue):
    """im2col.cl and col2im.cl against numpy on assorted convolutions. Returns failures."""
    # (N, C, H, W, groups, R, S, stride, pad (top, left), dil, extra bottom/right pad)
    cases = [(2, 3, 7, 9, 1, 3, 3, (1, 1), (1, 1), (1, 1), (1, 1)),
             (1, 4, 10, 11, 2, 3, 2, (2, 3), (0, 1), (1, 1), (1, 0)),
             (2, 6, 9, 9, 3, 3, 3, (2, 2), (2, 2), (2, 2), (0, 1)),
             (1, 8, 5, 6, 8, 3, 3, (1, 1), (1, 1), (1, 1), (1, 1)),
             (3, 2, 13, 4, 1, 1, 1, (1, 1), (0, 0), (1, 1), (0, 0)),
             (1, 3, 16, 16, 1, 7, 7, (2, 2), (3, 2), (1, 1), (2, 3))]
    rng = np.random.default_rng(1)
    mf = cl.mem_flags
    fails = 0
    for tw in (1, 8, 64):
        i2c = cl.Kernel(build(ctx, IM2COL_CL, {"IM2COL_TW": tw})[0], "im2col")
        c2i = cl.Kernel(build(ctx, COL2IM_CL, {"COL2IM_TW": tw})[0], "col2im")
        for N, C, H, W, groups, R, S, st, pad, dil, extra in cases:
            OH = (H + pad[0] + extra[0] - dil[0] * (R - 1) - 1) // st[0] + 1
            OW = (W + pad[1] + extra[1] - dil[1] * (S - 1) - 1) // st[1] + 1
            cg = C // groups
            x = rng.standard_normal((N, C, H, W), dtype=np.float32)
            rows, ldcol = cg * R * S, OH * OW + 3
            cstride = rows * ldcol + 5
            xbuf = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR,
                             hostbuf=np.concatenate([np.zeros(2, np.float32), x.ravel()]))
            col = np.full(N * groups * cstride + 1, np.nan, np.float32)
            cbuf = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=col)
            # CS_CONV_PARAMS in Problem.kernel_args() order (K, not read here, is 0)
            conv = [np.int32(v) for v in (N, C, H, W, 0, R, S, OH, OW, groups, *pad, *st, *dil)]
            runs = ceil_div(OH, max(1, tw // OW)) * ceil_div(OW, tw)   # rows taken together
            i2c(queue, (runs, rows, N * groups), None, xbuf, cbuf, *conv,
                np.int32(2), np.int32(1), np.int32(ldcol), np.int32(groups * cstride),
                np.int32(cstride))
            cl.enqueue_copy(queue, col, cbuf).wait()
            got = np.stack([col[1 + b * cstride:1 + b * cstride + rows * ldcol]
                            .reshape(rows, ldcol)[:, :OH * OW] for b in range(N * groups)])
            ref = ref_im2col(x, groups, R, S, st, pad, dil, OH, OW)
            ok1 = np.array_equal(got, ref)
            # col2im of a random column matrix over a random dx (bare: overwritten)
            cm = rng.standard_normal(ref.shape, dtype=np.float32)
            for b in range(N * groups):
                col[1 + b * cstride:1 + b * cstride + rows * ldcol].reshape(
                    rows, ldcol)[:, :OH * OW] = cm[b]
            cl.enqueue_copy(queue, cbuf, col)
            dx0 = rng.standard_normal(x.size + 1, dtype=np.float32)
            dbuf = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=dx0)
            c2i(queue, (H * ceil_div(W, tw), cg, N * groups), None, cbuf, dbuf, *conv,
                np.int32(1), np.int32(ldcol), np.int32(groups * cstride), np.int32(cstride),
                np.int32(1))
            dx = np.empty_like(dx0)
            cl.enqueue_copy(queue, dx, dbuf).wait()
            dref = ref_col2im(cm, x.shape, groups, R, S, st, pad, dil, OH, OW)
            err = float(np.abs(dx[1:].reshape(x.shape) - dref).max())
            ok2 = err < 1e-4 and dx[0] == dx0[0]
            fails += not (ok1 and ok2)
            if not (ok1 and ok2) or os.environ.get("VERBOSE"):
                print(f"  IM2COL_TW={tw} x={N, C, H, W} g={groups} RS={R, S} stride={st} "
                      f"pad={pad} dil={dil} -> {OH}x{OW}: im2col {'ok' if ok1 else 'FAIL'}, "
                      f"col2im err {err:.1e} {'ok' if ok2 else 'FAIL'}")
    print(f"check-im2col: {'all ok' if not fails else f'{fails} FAILED'}")
    return fails

# }}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-c", "--config", action="append", default=[],
                    help="defines, e.g. 'TM=6 TN=16 VW=8' (repeatable); KERNEL=<file> builds that"
                         " file instead of gemm.cl (e.g. an older version, for an A/B run)")
    ap.add_argument("--size", type=int, help="M = N = K")
    ap.add_argument("--mnk", type=int, nargs=3, metavar=("M", "N", "K"))
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--shared-a", action="store_true",
                    help="one A for every batch entry (stride 0), as the solvers pass weights")
    ap.add_argument("--pad", type=int, nargs="+", default=[0],
                    help="add to every leading dimension, or to lda ldb ldc (3 values)")
    ap.add_argument("--runs", type=int, default=7, help="timed launches per measurement")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1,
                    help="measure every config this many times, interleaved")
    ap.add_argument("--peak", action="store_true", help="measure the FMA peak first")
    ap.add_argument("--peak-value", type=float, help="known peak GFLOP/s, for %% of peak")
    ap.add_argument("--peak-iters", type=int, default=20000)
    ap.add_argument("--quiet", type=float, default=20,
                    help="before each measurement wait up to this many s for idle CPUs")
    ap.add_argument("--paired-peak", action="store_true",
                    help="launch the FMA peak kernel right before each timed GEMM launch and"
                         " report the GEMM as %% of that paired peak (median over all pairs;"
                         " robust on shared machines)")
    ap.add_argument("--check-suite", action="store_true", help="odd-size correctness suite")
    ap.add_argument("--check-im2col", action="store_true", help="im2col.cl / col2im.cl vs numpy")
    ap.add_argument("--device", default="", help="substring of '<platform> <device>'")
    args = ap.parse_args()

    ctx, dev = pick_device(args.device)
    queue = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    print(f"device {dev.name!r} ({dev.platform.name}, driver {dev.driver_version}), "
          f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}")
    peak = args.peak_value
    if args.peak:
        peak = measure_peak(ctx, dev, queue, args)

    configs = [parse_defines(c) for c in args.config] or ([{}] if args.size or args.mnk else [])
    fails = check_im2col(ctx, queue) if args.check_im2col else 0
    if args.check_suite:
        for d in configs:
            fails += check_suite(ctx, queue, d)
    if args.size or args.mnk:
        M, N, K = args.mnk or (args.size,) * 3
        runs = []
        for d in configs:
            prg, tbuild = build(ctx, GEMM_CL, d)
            pad = tuple(args.pad) if len(args.pad) == 3 else args.pad[0]
            prob = Problem(ctx, M, N, K, batch=args.batch, ta=d.get("TRANS_A", 0),
                           tb=d.get("TRANS_B", 0), pad=pad, shared_a=args.shared_a)
            launch = make_launch(queue, cl.Kernel(prg, "gemm"), prob, d)
            t0 = time.perf_counter()
            err, clob = prob.check(queue, launch)  # first launch also compiles (PoCL)
            runs.append((d, launch, err, clob, tbuild, time.perf_counter() - t0, [], prob))
        flops = 2.0 * M * N * K * args.batch
        pk_launch, pk_flops = peak_launcher(ctx, dev, queue, args.peak_iters // 4)
        wake_launch = peak_launcher(ctx, dev, queue, args.peak_iters)[0]
        ratios = {i: [] for i in range(len(runs))}
        peaks = {i: [] for i in range(len(runs))}
        noisy = 0
        for _ in range(args.rounds):
            for i, (d, launch, *_, meds, _prob) in enumerate(runs):
                noisy += not wait_quiet(args.quiet)
                if args.paired_peak:
                    med, pairs = paired_times(queue, launch, pk_launch, wake_launch, args.warmup,
                                               args.runs)
                    meds.append(med)
                    for t_gemm, t_peak in pairs:
                        ratios[i].append(flops / t_gemm / (pk_flops / t_peak))
                        peaks[i].append(pk_flops / t_peak * 1e-9)
                else:
                    meds.append(event_times(queue, launch, args.warmup, args.runs)[0])
        if noisy:
            print(f"note: {noisy} measurements started while other processes used the CPUs")
        for i, (d, launch, err, clob, tbuild, tfirst, meds, _prob) in enumerate(runs):
            med = statistics.median(meds)
            gf = flops / med * 1e-9
            pct = f" {100 * gf / peak:5.1f}% of peak" if peak else ""
            if ratios[i]:
                pct += (f" {100 * statistics.median(ratios[i]):5.1f}% of paired peak"
                        f" (peak median {statistics.median(peaks[i]):.0f})")
            ok = err < 1e-5 and not clob
            fails += not ok
            name = " ".join(f"{k}={v}" for k, v in sorted(d.items())) or "(defaults)"
            print(f"{M}x{N}x{K} b{args.batch} {name}: {med * 1e3:8.3f} ms {gf:8.1f} GFLOP/s"
                  f" (best round {flops / min(meds) * 1e-9:.1f})"
                  f"{pct}  rounds [{' '.join(f'{flops / m * 1e-9:.0f}' for m in meds)}]"
                  f"  err {err:.1e}{' CLOBBERED' if clob else ''} {'ok' if ok else 'FAIL'}"
                  f"  build {tbuild:.2f}s first-launch {tfirst:.2f}s")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
