"""First pass on an unseen batch (`convsolve bench --first-pass`): a network's forward pass
through the numpy API in fresh processes, against the same pass once everything is in place.

A priming process runs the pass at another batch (``--prime-batch``) in the numpy API's default
find mode, which warms the kernel caches (convsolve's and the driver's: overhead.child_env puts
them in a temporary folder) and leaves the find-db no record of the batch measured.  Then, for
each find mode asked, one fresh process on a copy of those warm caches and one on empty (cold)
caches, each with an empty user find-db and perf-db of its own, run the pass at ``--batch``:
``convsolve.conv2d`` on each layer, its count of times.  Each reports the first pass's wall time
(the default handle made before it, timed apart), the median of ``passes`` passes after it, and
what the first pass compiled: ``programs`` built from source (new entries in convsolve's kernel
cache, or PoCL's ``program.bc`` in its own, since convsolve leaves PoCL's programs to PoCL) and
``driver`` compiles of built programs (PoCL's work-group functions, made at a kernel's first
launch for each local size; files NVIDIA's driver adds to its JIT cache).  Afterwards each
layer's solver is read from ``convsolve.find`` in the same mode (a find-db hit, or the same
fallback ranking), with whether it is dynamic (every size a kernel argument).
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .. import env
from ..api import conv2d, default_handle
from ..arith import ceil_div
from ..device.tensors import device_buffers, random_tensors
from ..engine.find import FindMode, find
from ..engine.run import resolve_solver
from ..engine.trials import TRIAL_CALLS
from ..errors import ConvsolveError, ValidationError
from ..problem import Problem
from ..text import table
from .overhead import child_env

#: The --modes name of the numpy API's own find mode (CONVSOLVE_FIND_MODE unset).
DEFAULT = "default"
#: Issue 26's target: the whole first pass within this many times the steady pass.
TARGET_RATIO = 2.0
#: Calls of a layer after its first that settle its online trials (engine/trials.py: three
#: candidates at most, then the call that records them); passes that long run between the first
#: pass and the steady ones, their time beyond the steady pass reported as what settling cost.
SETTLE_CALLS = 3 * TRIAL_CALLS + 1
#: The kernel-cache folders a pass may add to, by variable (overhead.child_env sets each).
CACHE_VARS = (env.CACHE_DIR.name, "POCL_CACHE_DIR", "CUDA_CACHE_PATH")


# {{{ the parent: priming, then a fresh process per mode and cache

def parse_modes(text):
    """[(FindMode, whether it is the default)] of --modes, a comma list of find-mode names or
    numbers and 'default'; a mode asked twice (the default and its name) is measured once."""
    default = FindMode.parse(env.FIND_MODE.default)
    chosen = {}
    for token in (t.strip() for t in text.split(",") if t.strip()):
        is_default = token.lower() == DEFAULT
        try:
            mode = default if is_default else FindMode.parse(token)
        except ValidationError:
            raise ValidationError("--modes", text, f"{token!r} is not a find mode: expected "
                                  f"{DEFAULT} or " + ", ".join(m.name for m in FindMode)) from None
        chosen[mode] = chosen.get(mode, False) or is_default
    if not chosen:
        raise ValidationError("--modes", text, "names no find mode")
    return list(chosen.items())


def _child(layers, folder, mode, passes, db=None):
    """The report of a fresh process timing ``layers`` on the caches in ``folder``; ``mode``
    None leaves CONVSOLVE_FIND_MODE unset; ``db`` is the user find-db's path (the folder's
    own by default), which must not exist yet."""
    environ = child_env(folder)
    db = Path(db or environ[env.USER_DB_PATH.name])
    if db.exists():
        raise ConvsolveError(f"bench --first-pass: the find-db {db} of a fresh pass exists")
    environ[env.USER_DB_PATH.name] = str(db)
    environ[env.PERF_DB_PATH.name] = str(db.with_name(db.stem + "_perf.sqlite"))
    environ.pop(env.FIND_MODE.name, None)
    environ.update({env.FIND_MODE.name: mode.name} if mode is not None else {})
    spec = json.dumps({"layers": layers, "passes": passes})
    out = subprocess.run([sys.executable, "-m", "convsolve.bench.first_pass"], input=spec,
                         env=environ, capture_output=True, text=True, timeout=3600, check=False)
    if out.returncode:
        raise ConvsolveError(f"bench --first-pass: the pass in {mode.name if mode else DEFAULT}"
                             f" mode failed: {out.stderr.strip()[-2000:]}")
    return {**json.loads(out.stdout.strip().splitlines()[-1]), "find_db": str(db)}


def measure(layers, primer, modes, passes):
    """{'prime': report, 'runs': [report]}: ``primer`` (the layers at the priming batch) timed
    once in the default mode, then ``layers`` per mode of ``modes`` (parse_modes) on a copy of
    the primed caches and on empty ones; layers are {'name', 'count', 'problem': key}."""
    with tempfile.TemporaryDirectory(prefix="convsolve-first-pass-") as tmp:
        primed = Path(tmp) / "primed"
        prime = _child(primer, primed, None, 0, db=Path(tmp) / "prime_db.sqlite")
        runs = []
        for index, (mode, is_default) in enumerate(modes):
            for cache in ("warm", "cold"):
                folder = Path(tmp) / f"{cache}-{index}"
                if cache == "warm":   # a copy: a mode's pass must not warm the next mode's
                    shutil.copytree(primed, folder, symlinks=True)
                run = _child(layers, folder, None if is_default else mode, passes)
                label = f"{mode.name} ({DEFAULT})" if is_default else mode.name
                runs.append({**run, "mode": label, "cache": cache})
    return {"prime": prime, "runs": runs}

# }}}


# {{{ the child: the pass, its compiles, and the solvers it used

def cache_files():
    """{(variable, relative path)} of the files in the kernel caches the variables name."""
    files = set()
    for var in CACHE_VARS:
        root = Path(os.environ.get(var) or os.devnull)
        if root.is_dir():
            files.update((var, str(p.relative_to(root))) for p in root.rglob("*") if p.is_file())
    return files


def compiled(new):
    """{'programs', 'driver'}: how many of the ``new`` cache files (cache_files' pairs) are a
    program built from source and how many a driver's compile of a built program."""
    programs = sum(1 for var, path in new if (var, Path(path).suffix) == (CACHE_VARS[0], ".bin")
                   or (var, Path(path).name) == (CACHE_VARS[1], "program.bc"))
    driver = sum(1 for var, path in new if (var, Path(path).suffix) == (CACHE_VARS[1], ".so")
                 or (var == CACHE_VARS[2] and Path(path).name != "index"))
    return {"programs": programs, "driver": driver}


def _pass(calls, rows=None):
    """Wall ms of each layer's calls (``calls``: [(count, problem, x, w)]); with ``rows``, each
    row also gets its layer's time and what it compiled."""
    times = []
    for index, (count, problem, x, w) in enumerate(calls):
        before = cache_files() if rows is not None else None
        begin = time.perf_counter()
        for _ in range(count):
            conv2d(x, w, problem.conv.strides, problem.conv.pads, problem.conv.dilations,
                   problem.groups)
        times.append((time.perf_counter() - begin) * 1e3)
        if rows is not None:   # PoCL's work-group functions by kernel and local size
            new = cache_files() - before
            rows[index].update(first_ms=times[-1], **compiled(new), work_groups=sorted(
                "/".join(Path(path).parts[-3:-1]) for _, path in new if path.endswith(".so")))
    return times


def run_pass(layers, passes):
    """In the child: the first pass over ``layers``, then ``passes`` more, and each layer's
    solver as find in this process's mode now gives it."""
    begin = time.perf_counter()
    handle = default_handle()
    handle_ms = (time.perf_counter() - begin) * 1e3
    problems = [Problem.from_key(layer["problem"]) for layer in layers]
    hosts = [random_tensors(problem) for problem in problems]
    calls = [(layer["count"], problem, host["x"], host["w"])
             for layer, problem, host in zip(layers, problems, hosts)]
    rows = [dict(layer) for layer in layers]
    first = _pass(calls, rows)
    settling = [sum(_pass(calls)) for _ in range(ceil_div(SETTLE_CALLS, min(c[0] for c in calls)))]
    steady = [_pass(calls) for _ in range(passes)]
    for index, (row, (_, problem, _, _)) in enumerate(zip(rows, calls)):
        if steady:
            row["steady_ms"] = statistics.median(times[index] for times in steady)
        bufs = device_buffers(handle, random_tensors(problem))
        row["solver"] = find(handle, problem, **bufs, request_count=1)[0].solver
        row["dynamic"] = resolve_solver(handle, problem, row["solver"]).dynamic
    steady_ms = statistics.median(sum(times) for times in steady) if steady else None
    return {"find_mode": FindMode.parse().name, "device": handle.name, "handle_ms": handle_ms,
            "first_ms": sum(first), "steady_ms": steady_ms, "settling": len(settling),
            "settling_extra_ms": sum(settling) - len(settling) * steady_ms if steady_ms else None,
            "ratio": sum(first) / steady_ms if steady_ms else None,
            "programs": sum(r["programs"] for r in rows), "driver": sum(r["driver"] for r in rows),
            "dynamic_layers": sum(r["dynamic"] for r in rows), "layers": rows}

# }}}


def format_first_pass(report, markdown=False):
    """The table of a ``bench --first-pass`` report: a row per find mode and kernel cache."""
    def ms(value):
        return "-" if value is None else f"{value:.0f}"
    rows = [(r["mode"], r["cache"], ms(r["first_ms"]), ms(r["steady_ms"]),
             "-" if r["ratio"] is None else f"{r['ratio']:.2f}",
             "-" if r["ratio"] is None else ("yes" if r["ratio"] <= TARGET_RATIO else "no"),
             f"{ms(r.get('settling_extra_ms'))} ({r.get('settling', '-')})",
             r["programs"], r["driver"], f"{r['dynamic_layers']}/{len(r['layers'])}",
             ms(r["handle_ms"])) for r in report["runs"]]
    headers = ("find mode", "kernel cache", "first pass ms", "steady pass ms", "ratio",
               f"within {TARGET_RATIO:g}x", "settling extra ms (passes)", "programs built",
               "driver compiles", "layers on dynamic solvers", "handle ms")
    prime = report["prime"]
    title = (f"first pass on an unseen batch, suite {report['suite']}, batch {report['batch']}, "
             f"{len(prime['layers'])} distinct layers ({report['layers_total']} convolutions), "
             f"device {prime['device']}\n")
    return "\n".join([title, table(rows, headers, markdown, ("find mode",)), (
        f"\nprimed: a fresh process ran the pass at batch {report['prime_batch']} in the "
        f"default mode ({prime['find_mode']}) on empty caches: {ms(prime['first_ms'])} ms, "
        f"{prime['programs']} programs built, {prime['driver']} driver compiles; warm: a fresh "
        "process on a copy of those caches, cold: on empty ones, each with an empty find-db; "
        "settling: the passes after the first that online trials take to time and record "
        "their candidates (engine/trials.py), their time beyond as many steady passes; "
        f"steady: the median of {report['passes']} passes after those, in the same process; "
        "programs built: from source in the first pass (new kernel-cache entries); driver "
        "compiles: of built programs (PoCL's work-group functions at a kernel's first launch); "
        "handle: making the default handle before the pass, not in it"), *map(_compiles, [
            run for run in report["runs"] if run["cache"] == "warm"])])


def _compiles(run):
    """A line naming the layers on a dynamic solver whose first pass on warm caches compiled."""
    layers = [f"{row['name']} ({row['programs']} programs, {row['driver']} driver)"
              for row in run["layers"] if row["dynamic"] and row["programs"] + row["driver"]]
    return (f"{run['mode']}, warm: compiled in the first pass though a dynamic solver serves "
            f"the layer: {', '.join(layers) or 'none'}")


if __name__ == "__main__":
    request = json.loads(sys.stdin.read())
    print(json.dumps(run_pass(request["layers"], request["passes"])))
