"""Training data for the solver ranking: every applicable solver of each problem timed robustly.

Each problem's solvers are built once, warmed up and timed in interleaved rounds (on a cluster
timing on a CPU, the builds and warm-ups beside other workers' builds, the rounds alone: the
device/timing.py holds; the order
rotates each round, so drift in the device's clocks or load falls on all alike); a solver's
label is the median of its rounds (the lower middle one of an even count).  One that is over
CUTOFF_FACTOR times the best after the first round is timed once more at once (a single sample
can be an outlier), and if both are over, it keeps the lower: its rank is settled and timing it
further would cost the most.
Records are JSON lines, the first a header with the device's fingerprint and the date; a run
appends to its file and skips the problems already there, so it can be resumed.  Each problem
is a scale job (core/scale/), so a Dask cluster can time them (``--cluster``); the client
writes the file.
"""
import datetime
import json
import platform
import statistics
import sys
import time
from importlib import metadata
from pathlib import Path

import numpy as np
import pyopencl as cl

from .. import env, scale, tuning
from ..db.journal import Journal
from ..device.tensors import device_buffers
from ..device.timing import CUTOFF_LOOKS, held, settled, time_batch, warm_up
from ..engine import fusion
from ..engine.benchmark import CUTOFF_FACTOR
from ..engine.run import check_buffers
from ..engine.search import tuned_invoker
from ..errors import ConvsolveError, ValidationError
from ..solvers.calls import workspace_of
from ..solvers.registry import solver_attribute

#: Timed rounds per problem: at least MIN_ROUNDS, at most ``repeat``, fewer once BUDGET_MS of
#: kernel time is spent on the problem.
MIN_ROUNDS = 3
BUDGET_MS = 400.0


def cpu_model():
    """The host CPU's model name and its widest vector ISA (e.g. 'AMD EPYC 9R14 (avx512)')."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or "unknown"
    model = next((line.split(":", 1)[1].strip() for line in text.splitlines()
                  if line.startswith("model name")), "unknown")
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines()
                  if line.startswith("flags")), [])
    isa = next((name for name in ("avx512f", "avx2", "avx", "sse4_2") if name in flags), "?")
    return f"{model} ({isa.removesuffix('f')})"


def fingerprint(device):
    """What a record file says about the device that measured it."""
    keys = tuning.device_keys(device)   # ..., "type/vendor", "type", "*"
    return {"name": device.name.strip(), "keys": list(keys),
            "compute_units": device.max_compute_units,
            "vector_width": device.native_vector_width_float,
            "type": keys[-2], "local_mem_bytes": device.local_mem_size,
            "max_work_group_size": device.max_work_group_size,
            "global_mem_bytes": device.global_mem_size, "driver": device.driver_version,
            "version": device.version, "host_cpu": cpu_model()}


def _filled(problem, rng):
    """Host tensors of the problem's shapes, tiled from a small random block (fast at any size:
    timing does not depend on the values, and they are finite for the output check)."""
    block = rng.uniform(-1, 1, 4096).astype(np.float32)
    return {name: np.resize(block, getattr(problem, name).shape) for name in "xwy"}


def time_problem(handle, problem, repeat=5, include_naive=False, rng=None):
    """({solver: median ms}, {solver: why it has no time}) for ``problem``'s applicable solvers
    (timed on ``handle``'s profiling queue, on buffers of their own)."""
    handle = handle.timing
    applicable, _ = fusion.candidates(problem)
    solvers = [s for s in applicable if include_naive or ".Naive" not in s.name]
    failed, invokers, needs = {}, {}, {}
    for solver in solvers:
        try:
            needs[solver] = workspace_of(solver, problem, handle)
            invokers[solver] = tuned_invoker(handle, solver, problem)
        except ConvsolveError as exc:
            failed[solver.name] = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
    cap = min(env.size_in_bytes(env.WORKSPACE_LIMIT), handle.device.max_mem_alloc_size)
    for solver in [s for s in invokers if needs[s] > cap]:
        failed[solver.name] = f"needs {needs[solver]} bytes of workspace"
        del invokers[solver]
    if not invokers:
        return {}, failed
    host = _filled(problem, rng or np.random.default_rng(0))
    raw = device_buffers(handle, host)
    buffers = check_buffers(problem, raw["x"], raw["w"], raw["y"], handle)
    size = max([needs[s] for s in invokers] + [0])
    scratch = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, size) if size else None
    check = fusion.output_check(handle, problem, buffers, False)
    limit_s = env.positive_number(env.FIND_RUN_TIMEOUT_S)
    samples, runs = {}, {}

    def given(solver):
        return scratch if needs[solver] else None

    def timed(solver):
        return time_batch(invokers[solver], buffers, given(solver), runs[solver], limit_s)
    try:
        for solver in list(invokers):   # warm-ups (untimed: PoCL generates code in them)
            try:
                runs[solver] = warm_up(invokers[solver], buffers, given(solver), limit_s)
            except ConvsolveError as exc:
                failed[solver.name] = str(exc)
        with held():
            for solver in runs:   # round one: one timed batch each, the output checked
                try:
                    samples[solver] = [timed(solver)]
                    fault = check.fault(solver_attribute(solver, "tolerance"))
                except ConvsolveError as exc:
                    fault = str(exc)
                if fault:
                    failed[solver.name] = fault
                    samples.pop(solver, None)
            labels = later_rounds(samples, timed, runs, repeat)
    finally:
        for buffer in [*raw.values(), scratch]:
            if buffer is not None:
                buffer.release()
    return {s.name: ms for s, ms in labels.items()}, failed


def later_rounds(samples, timed, runs, repeat):
    """Labels ({solver: ms}) from round one's ``samples`` ({solver: [ms]}, extended in place)
    and the rounds after: a solver over CUTOFF_FACTOR times the best is timed again at once and
    settled if still over; the others are timed in rounds, the order rotating, up to ``repeat``
    rounds (MIN_ROUNDS once BUDGET_MS is spent).  ``timed(solver)`` times one batch of
    ``runs[solver]`` runs."""
    best = min((s[0] for s in samples.values()), default=0.0)
    for solver in [s for s in samples if samples[s][0] > best * CUTOFF_FACTOR]:
        samples[solver] += [timed(solver) for _ in range(CUTOFF_LOOKS - 1)]
    racing = [s for s in samples if not settled(samples[s], best * CUTOFF_FACTOR)]
    spent = sum(samples[s][0] * runs[s] for s in racing)
    for round_ in range(1, repeat):
        if round_ >= MIN_ROUNDS and spent >= BUDGET_MS:
            break
        shift = round_ % max(len(racing), 1)
        for solver in racing[shift:] + racing[:shift]:
            samples[solver].append(timed(solver))
            spent += samples[solver][-1] * runs[solver]
    return {solver: statistics.median_low(times) for solver, times in samples.items()}


def _done_keys(path, device):
    """Problem keys already in the record file (made by ``device``), for a resumed run."""
    if not path.exists():
        return set()
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    header = lines[0].get("header", {}) if lines else {}
    if lines and header.get("device", {}).get("name") != device.name.strip():
        raise ValidationError("--out", str(path), f"holds records of "
                              f"{header.get('device', {}).get('name')!r}, not {device.name!r}")
    return {line["problem"] for line in lines[1:]}


def time_job(handle, problem, repeat, include_naive, out):
    """A scale job's runner: time_problem's (times, failures) for the record file ``out`` (the
    file is part of the job's identity, so that each file's run resumes on its own)."""
    return time_problem(handle, problem, repeat, include_naive)


def collect(executor, handle, problems, path, repeat=5, include_naive=False, command="",
            time_limit_s=None, quiet=False):
    """Time ``problems`` (time_problem, as jobs of ``executor``, whose device kind must be
    ``handle``'s) into the JSON-lines file ``path``, stopping once ``time_limit_s`` has passed;
    returns the run's scale Summary (problems already in the file are not jobs)."""
    path = Path(path)
    kinds = executor.kinds()
    if kinds != [handle.db_key]:
        raise ValidationError("--cluster", kinds, "collect writes one device's records: the "
                              f"cluster must time on this host's {handle.db_key!r} alone")
    done = _done_keys(path, handle.device)
    jobs = [scale.job(f"{__name__}:time_job", p, handle.db_key, p.key(), repeat=repeat,
                      include_naive=include_naive, out=str(path.resolve()))
            for p in problems if p.key() not in done]
    journal = Journal()   # the file says what is done: a job done before but not in it runs again
    entries = journal.entries()
    journal.forget(j.id for j in jobs if getattr(entries.get(j.id), "state", "") == "done")
    deadline = None if time_limit_s is None else time.monotonic() + time_limit_s
    with path.open("a") as out:
        if not done and not path.stat().st_size:
            header = {"device": fingerprint(handle.device), "command": command,
                      "date": datetime.datetime.now(datetime.timezone.utc).isoformat(" ", "seconds"),
                      "convsolve": metadata.version("convsolve"), "repeat": repeat}
            out.write(json.dumps({"header": header}) + "\n")

        timed = 0

        def write(job, result):
            nonlocal timed
            if not result.error:
                timed += 1
                times, failed = result.value
                out.write(json.dumps({"problem": job.problem, "times_ms": {
                    name: float(f"{ms:.4g}") for name, ms in times.items()}, "failed": failed})
                    + "\n")
                out.flush()
            if deadline is not None and time.monotonic() > deadline:
                raise _OutOfTime
        summary = None
        try:
            summary = scale.drive(executor, jobs, write, "collect", quiet, done="timed")
        except _OutOfTime:
            pass
    print(f"collect: {timed} of {len(jobs)} problems timed ({len(done)} were already "
          f"in {path})", file=sys.stderr)
    if summary is not None and summary.failed:
        print(summary.text("timed"), file=sys.stderr)
    return summary


class _OutOfTime(Exception):
    """collect's time limit passed: the jobs not done are left to the next run."""
