# Backward-weights split-reduction rule on the GPU: ResNet-50's backward-weights layers timed by
# `convsolve bench` under several (SPLIT_TILES, MIN_SLICE_DEPTH, MAX_SLICES) of
# convsolve_gemm.plan, each in a fresh process with an empty find-db.
# Run from the repository root:  bash scripts/bench_gpu.sh exec bash plugins/gemm/tools/gpu_tune/split_sweep.sh
# Environment: SUITE (resnet50), SETTINGS ("256,512,64 512,256,128 ..."; "1,1,1" never splits), BATCH (32),
# OUT (results folder).
set -euo pipefail
out=${OUT:-split-sweep-out}
mkdir -p "$out"
for setting in ${SETTINGS:-"256,512,64" "512,256,128" "132,1024,32" "1,1,1"}; do
    IFS=, read -r tiles depth slices <<< "$setting"
    CONVSOLVE_USER_DB_PATH="$out/db_$tiles-$depth-$slices.sqlite" python3 - "$tiles" "$depth" "$slices" "${BATCH:-32}" "${SUITE:-resnet50}" <<'PY' > "$out/wrw_$tiles-$depth-$slices.md"
import sys
from convsolve import bench
from convsolve_gemm import plan
plan.SPLIT_TILES, plan.MIN_SLICE_DEPTH, plan.MAX_SLICES = map(int, sys.argv[1:4])
bench.main(["--suite", sys.argv[5], "--batch", sys.argv[4], "--directions", "wrw", "--markdown"])
PY
    echo "== SPLIT_TILES=$tiles MIN_SLICE_DEPTH=$depth MAX_SLICES=$slices"
    grep -E "total|^\| [0-9]+ " "$out/wrw_$tiles-$depth-$slices.md" | awk -F'|' '{print $3, $7, $8, $10}'
done
