#!/usr/bin/env bash
# gpu_gc_probe.sh OUTDIR: the plugins' tests on the GPU twice at once, to find what makes NVIDIA's
# OpenCL crash while the cyclic garbage collector runs (RELIABILITY.md): once with the collector
# off, once collecting after every test and naming the test first.  Through bench_gpu.sh exec.
set -u
out=${1:?OUTDIR}
mkdir -p "$out"
run() {   # NAME CODE: one process, its output and exit code in OUTDIR/NAME.txt
    timeout "${LIMIT_S:-400}" python3 -X faulthandler -c "$2" > "$out/$1.txt" 2>&1
    echo "exit code $?" >> "$out/$1.txt"
}
run gc_off "import gc, sys, pytest
gc.disable()
sys.exit(pytest.main(['-q', '-p', 'no:randomly', 'plugins']))" &
run gc_each_test "import gc, sys, pytest
class Collect:
    def pytest_runtest_teardown(self, item):
        print('collecting after', item.nodeid, flush=True)
        gc.collect()
sys.exit(pytest.main(['-q', '-s', 'plugins'], plugins=[Collect()]))" &
wait
tail -n 3 "$out"/*.txt
