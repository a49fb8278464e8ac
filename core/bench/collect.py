"""Training data for the solver ranking: every applicable solver of each problem timed robustly.

Each problem's solvers are built once, warmed up and timed in interleaved rounds (the order
rotates each round, so drift in the device's clocks or load falls on all alike); a solver's
label is the median of its rounds.  One that is over CUTOFF_FACTOR times the best after the
first round keeps that one time: its rank is settled and timing it further would cost the most.
Records are JSON lines, the first a header with the device's fingerprint and the date; a run
appends to its file and skips the problems already there, so it can be resumed.
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

from .. import env, tuning
from ..device.tensors import device_buffers
from ..device.timing import elapsed_ms, wait
from ..engine import fusion
from ..engine.find import CUTOFF_FACTOR
from ..engine.run import check_buffers
from ..engine.search import tuned_invoker
from ..errors import ConvsolveError, ValidationError
from ..solvers.calls import workspace_of
from ..solvers.registry import solver_attribute
from .command import Progress

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
    """({solver: median ms}, {solver: why it has no time}) for ``problem``'s applicable solvers."""
    applicable, _ = fusion.candidates(problem)
    solvers = [s for s in applicable if include_naive or ".Naive" not in s.name]
    failed, invokers, needs = {}, {}, {}
    for solver in solvers:
        try:
            needs[solver] = workspace_of(solver, problem)
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
    samples = {}

    def timed(solver):
        events = invokers[solver](buffers, scratch if needs[solver] else None)
        wait(events, limit_s)
        return elapsed_ms(events)
    try:
        for solver in list(invokers):   # round one: warm-up, one timed run, the output checked
            try:
                timed(solver)
                samples[solver] = [timed(solver)]
                fault = check.fault(solver_attribute(solver, "tolerance"))
            except ConvsolveError as exc:
                fault = str(exc)
            if fault:
                failed[solver.name] = fault
                samples.pop(solver, None)
        best = min((s[0] for s in samples.values()), default=0.0)
        racing = [s for s in samples if samples[s][0] <= best * CUTOFF_FACTOR]
        spent = sum(samples[s][0] for s in racing)
        for round_ in range(1, repeat):
            if round_ >= MIN_ROUNDS and spent >= BUDGET_MS:
                break
            shift = round_ % max(len(racing), 1)
            for solver in racing[shift:] + racing[:shift]:
                samples[solver].append(timed(solver))
                spent += samples[solver][-1]
    finally:
        for buffer in [*raw.values(), scratch]:
            if buffer is not None:
                buffer.release()
    return {s.name: statistics.median(t) for s, t in samples.items()}, failed


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


def collect(handle, problems, path, repeat=5, include_naive=False, command="", time_limit_s=None):
    """Time ``problems`` (time_problem) into the JSON-lines file ``path``, stopping between
    problems once ``time_limit_s`` has passed; returns how many were timed now (problems
    already in the file are skipped)."""
    path = Path(path)
    done = _done_keys(path, handle.device)
    todo = [p for p in problems if p.key() not in done]
    progress, rng = Progress(len(todo)), np.random.default_rng(0)
    deadline = None if time_limit_s is None else time.monotonic() + time_limit_s
    with path.open("a") as out:
        if not done and not path.stat().st_size:
            header = {"device": fingerprint(handle.device), "command": command,
                      "date": datetime.datetime.now(datetime.timezone.utc).isoformat(" ", "seconds"),
                      "convsolve": metadata.version("convsolve"), "repeat": repeat}
            out.write(json.dumps({"header": header}) + "\n")
        for problem in todo:
            if deadline is not None and time.monotonic() > deadline:
                break
            progress.show(problem.key())
            times, failed = time_problem(handle, problem, repeat, include_naive, rng)
            times = {name: float(f"{ms:.4g}") for name, ms in times.items()}
            out.write(json.dumps({"problem": problem.key(), "times_ms": times,
                                  "failed": failed}) + "\n")
            out.flush()
            progress.step()
    progress.close()
    print(f"collect: {progress.done} of {len(todo)} problems timed ({len(done)} were already "
          f"in {path})", file=sys.stderr)
    return progress.done
