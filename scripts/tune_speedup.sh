#!/bin/bash
# Issue 32's and 33's tune measurement: `convsolve tune` in one process against the same tune on
# a Dask cluster, each on empty user dbs and cold kernel caches (convsolve's binary cache, PoCL's
# and NVIDIA's), then how often the two runs' find-db winners agree (a tie within 3% agrees).
#     bash scripts/tune_speedup.sh OUTDIR [tune flags...]
# e.g. (on the GPU machine, through scripts/bench_gpu.sh exec, which puts convsolve on the path)
#     bash scripts/tune_speedup.sh $OUT --suite resnet50 --batch 32 --directions all
# CLUSTER (default "local") is what --cluster gets; COMPILE_WORKERS, if set, --compile-workers.
set -u
OUTDIR=${1:?usage: tune_speedup.sh OUTDIR [tune flags...]}; shift
mkdir -p "$OUTDIR"
PY=${PYTHON:-python3}
run_tune() {   # run_tune NAME [extra tune flags...]: a cold tune into $OUTDIR/NAME, timed
  local dir="$OUTDIR/$1"; shift
  rm -rf "$dir"; mkdir -p "$dir"
  local start end
  start=$(date +%s.%N)
  CONVSOLVE_USER_DB_PATH=$dir/find.sqlite CONVSOLVE_PERF_DB_PATH=$dir/perf.sqlite \
    CONVSOLVE_CACHE_DIR=$dir/cache POCL_CACHE_DIR=$dir/pocl CUDA_CACHE_PATH=$dir/nv \
    "$PY" -m convsolve.cli tune "$@" --quiet > "$dir/tune.log" 2>&1
  local rc=$?
  end=$(date +%s.%N)
  echo "$dir: exit $rc, $("$PY" -c "print(f'{$end - $start:.1f}')") s" | tee "$dir/wall.txt"
}
run_tune single "$@"
run_tune cluster "$@" --cluster "${CLUSTER:-local}" \
  ${COMPILE_WORKERS:+--compile-workers "$COMPILE_WORKERS"}
"$PY" - "$OUTDIR/single/find.sqlite" "$OUTDIR/cluster/find.sqlite" <<'EOF' | tee "$OUTDIR/agreement.txt"
import sqlite3, sys
def table(path):
    rows = sqlite3.connect(path).execute(
        "select device, problem, solver, time_ms from find_v3 where failure is null")
    times = {}
    for device, problem, solver, time_ms in rows:
        times.setdefault(problem, {})[solver] = time_ms
    return times, {device for device, *_ in sqlite3.connect(path).execute(
        "select device from find_v3")}
(one, one_devices), (two, two_devices) = table(sys.argv[1]), table(sys.argv[2])
agree, shared, worst = 0, sorted(set(one) & set(two)), []
for problem in shared:
    a, b = min(one[problem], key=one[problem].get), min(two[problem], key=two[problem].get)
    # the other run's time of each winner against that run's best: within 3% is a tie
    ok = a == b or (b in one[problem] and one[problem][b] <= 1.03 * one[problem][a]) or (
        a in two[problem] and two[problem][a] <= 1.03 * two[problem][b])
    agree += ok
    if not ok:
        worst.append(f"  {problem}: {a} ({one[problem][a]:.4f} ms) vs {b} ({two[problem][b]:.4f} ms)")
print(f"problems: {len(one)} single, {len(two)} cluster, {len(shared)} in both")
print(f"winners agree on {agree}/{len(shared)} ({100 * agree / max(len(shared), 1):.1f}%)")
print("devices: single", sorted(one_devices), "cluster", sorted(two_devices))
print("\n".join(worst))
EOF
