#!/usr/bin/env python3
"""Set up convsolve in ./.venv (core, every plugin, the test extra, PoCL) and run the demo or the
test suite.

    python3 dev.py demo    set up, then run the driver on a ResNet-50 layer with verification
    python3 dev.py test    set up, then run the test suite in two pytest processes at once
                           (SHARDS); with arguments, one pytest run with them instead
                           (`python3 dev.py test tests -k find`)

Only the standard library is used here, so this works on a machine with nothing but Python.
"""
import hashlib
import os
import shutil
import subprocess
import sys
import threading
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PLUGINS = sorted(p for p in (ROOT / "plugins").iterdir()
                 if (p / "pyproject.toml").exists() and not p.name.startswith("_"))
DEMO = ["conv", "-n", "8", "-c", "64", "-H", "56", "-W", "56", "-k", "64",
        "-y", "3", "-x", "3", "-p", "1", "-q", "1", "-V", "1"]
ICD_DIR = Path("/etc/OpenCL/vendors")
#: The suite's halves, each a pytest process of its own, run at once: the suite's time is mostly
#: PoCL compiling kernels, on one core per process.  Plain processes, not pytest-xdist workers, so
#: that a test that kills its process (a crash in an OpenCL runtime) fails that half with the
#: signal named.  The FFT and Winograd plugins' tests (and direct's channels-last depthwise ones)
#: join the core's, and the Oclgrind runs of every plugin's kernels
#: (tests/testing/test_sanitized.py, 3.3 of the suite's 15 minutes of test time) the other
#: plugins', so that the halves take about the same time on 2 cores with cold caches (AVX2 EPYC,
#: 2026-12-05: 515 s and 542 s, against 350 s and 558 s with Winograd's tests in the second;
#: the suite's wall time moved less, 9 min 3-12 s against 9 min 18 s, as the sanitized half's
#: two Oclgrind workers keep both cores busy; after direct.Depthwise's unstaged kernels 541 s
#: and 583 s, 9 min 44 s in all, so test_depthwise_nhwc.py moved over: 553 s and 569 s, 9 min
#: 30 s, the suite's budget all but spent; Zen 4 EPYC, 2026-12-07: 431 s and 505 s, so every
#: direct test file but test_depthwise.py and implicit GEMM's epilogue tests moved over too;
#: on a clean checkout without torch (CI's case: the first half's torch tests skip) in a slow
#: hour of the host, everything 20% slower, 521 s and 581 s before the last three files moved,
#: about 556 s and 546 s by their durations); every other plugin's tests, present or future,
#: are in the second.
SANITIZED = "tests/testing/test_sanitized.py"
FIRST_HALF_PLUGIN_TESTS = ["plugins/fft", "plugins/winograd",
                           *(f"plugins/direct/tests/test_{name}.py" for name in (
                               "depthwise_nhwc", "tiled", "direct_epilogue", "naive", "wrw")),
                           "plugins/implicit_gemm/tests/test_igemm_epilogue.py"]
SHARDS = {"core+fft+winograd": ["tests", *FIRST_HALF_PLUGIN_TESTS, f"--ignore={SANITIZED}"],
          "plugins+oclgrind": ["plugins", *(f"--ignore={p}" for p in FIRST_HALF_PLUGIN_TESTS),
                               SANITIZED]}


def step(message):
    print(f"[dev.py] {message}", flush=True)


def ensure_opencl():
    """Install Debian's PoCL when no OpenCL driver is registered (PyPI's PoCL cannot build here)."""
    if ICD_DIR.is_dir() and any(ICD_DIR.glob("*.icd")):
        return
    apt = shutil.which("apt-get")
    if apt is None:
        sys.exit("[dev.py] no OpenCL driver found and no apt-get: install PoCL 3.1 or newer from "
                 "your distribution (Debian/Ubuntu: pocl-opencl-icd) or a GPU's OpenCL driver, "
                 "then run this again")
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    step("installing PoCL (pocl-opencl-icd) with apt-get")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(sudo + [apt, "-q", "update"], check=True, env=env)
    subprocess.run(sudo + [apt, "-q", "install", "-y", "--no-install-recommends",
                           "pocl-opencl-icd", "ocl-icd-libopencl1"], check=True, env=env)


def ensure_venv(extras):
    """Create .venv and install the core and every plugin editable, when their metadata changed."""
    projects = [ROOT, *PLUGINS]
    digest = hashlib.sha256(extras.encode())
    for project in projects:
        digest.update((project / "pyproject.toml").read_bytes())
    stamp = VENV / ".convsolve-setup"
    if stamp.exists() and stamp.read_text() == digest.hexdigest():
        return
    if not (BIN / "python").exists():
        step(f"creating {VENV}")
        venv.create(VENV, with_pip=True)
    pip = [str(BIN / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run(pip + ["setuptools>=68", "wheel"], check=True)
    targets = ["-e", f"{ROOT}[{extras}]" if extras else str(ROOT)]
    for plugin in PLUGINS:
        targets += ["-e", str(plugin)]
    step("installing convsolve and plugins: " + ", ".join(p.name for p in PLUGINS))
    subprocess.run(pip + ["--no-build-isolation", *targets], check=True)
    stamp.write_text(digest.hexdigest())


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in ("demo", "test"):
        sys.exit(__doc__)
    command, rest = sys.argv[1], sys.argv[2:]
    ensure_opencl()
    ensure_venv("test,dask")   # demo too: a plugin author's first `pytest` is then .venv's
    if command == "demo":
        args = [str(BIN / "convsolve"), *DEMO, *rest]
    elif rest:
        args = [str(BIN / "python"), "-m", "pytest", *rest]
    else:
        return run_shards()
    step(" ".join(args))
    return subprocess.run(args, check=False, cwd=ROOT).returncode


def run_shards():
    """Each of SHARDS in its own pytest process, all at once, their output lines relayed as they
    come, each prefixed with its shard's name; 0 when every one passed, else 1."""
    processes = {}
    for name, paths in SHARDS.items():
        args = [str(BIN / "python"), "-m", "pytest", *paths]
        step(f"[{name}] " + " ".join(args))
        processes[name] = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE,
                                           stderr=subprocess.STDOUT, text=True, errors="replace")
    relays = [threading.Thread(target=relay, args=item, daemon=True) for item in processes.items()]
    for thread in relays:
        thread.start()
    codes = {name: process.wait() for name, process in processes.items()}
    for thread in relays:   # daemons: a child the shard left behind may hold its pipe open
        thread.join(10)
    for name, code in codes.items():
        how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
        step(f"[{name}] " + ("passed" if code == 0 else f"failed ({how})"))
    return 0 if all(code == 0 for code in codes.values()) else 1


def relay(name, process):
    """Print ``process``'s output lines as they come, each prefixed with ``name``."""
    for line in process.stdout:
        print(f"[{name}] {line}", end="", flush=True)


if __name__ == "__main__":
    sys.exit(main())
