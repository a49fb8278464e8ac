#!/usr/bin/env bash
# gpu_suite.sh OUTDIR: the test suite on the GPU as two processes at once (the core's tests, the
# plugins'), with scripts/probe_exit.py (fresh programs, each exit code checked) beside them, each
# process's exit code recorded: what RELIABILITY.md's NVIDIA exit-crash entry rests on.  With
# NO_RELEASE=1 also the plugins' tests with the exit release undone (atexit.unregister of
# convsolve.device.handle.release_all).  Run it through `scripts/bench_gpu.sh exec`.
set -u
out=${1:?OUTDIR}
mkdir -p "$out"
run() {   # NAME ARGS...: one process, its output and exit code in OUTDIR/NAME.txt
    local name=$1; shift
    timeout "${LIMIT_S:-480}" "$@" > "$out/$name.txt" 2>&1
    echo "exit code $?" >> "$out/$name.txt"
}
run core python3 -m pytest -q -rs tests &
run plugins python3 -m pytest -q -rs plugins &
run probe python3 scripts/probe_exit.py &
[ "${NO_RELEASE:-0}" = 1 ] && run plugins_no_release python3 -c "import atexit, sys, pytest
from convsolve.device import handle
atexit.unregister(handle.release_all)
sys.exit(pytest.main(['-q', 'plugins']))" &
wait
tail -n 4 "$out"/*.txt
