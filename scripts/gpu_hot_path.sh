#!/usr/bin/env bash
# gpu_hot_path.sh OUTDIR: issue 26/27/28 figures on the GPU in one call (run it through
# `scripts/bench_gpu.sh exec`): the pipeline at batch 1 and 32 beside cuDNN, the ranking's
# inference time, get_solutions on a miss, and explain on ResNet-50's 3x3 128->128 28x28 layer
# at batch 32 (every solver timed, the GPU-shaped Winograd among them).  Each step has its own
# time limit, so a slow one leaves the others' results.
set -u
out=${1:?OUTDIR}
mkdir -p "$out"
step() {   # NAME LIMIT_S ARGS...
    local name=$1 limit=$2; shift 2
    timeout "$limit" "$@" > "$out/$name.txt" 2>&1
    echo "exit code $?" >> "$out/$name.txt"
}

step inference 60 python3 scripts/bench_heuristics.py --solvers 17 --trees 150 --depth 6
step immediate 90 python3 scripts/bench_immediate.py
step explain 120 python3 -m convsolve.cli explain -n 32 -c 128 -H 28 -W 28 -k 128 -y 3 -x 3 -p 1 -q 1
step pipeline1 200 python3 -m convsolve.bench --suite resnet50 --batch 1 --pipeline --compare torch --repeat 3
step pipeline32 160 python3 -m convsolve.bench --suite resnet50 --batch 32 --pipeline --compare torch --repeat 3
tail -n 30 "$out"/*.txt
