#!/usr/bin/env bash
# Device-side GEMM tuning run (call 1). Run from the repository root; writes into $OUT.
set -o pipefail
T=plugins/gemm/tools/gpu_tune
P="python3 plugins/gemm/tools/gemm_probe.py --device NVIDIA --quiet 0"
export PYTHONUNBUFFERED=1
step() { echo; echo "=== $(date -u +%H:%M:%S) $*"; }
main() {
  date -u; nvidia-smi -L
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
  python3 --version
  pip install -q --no-index --no-deps --no-compile --target /tmp/site build/gpu_wheels/cp312/*.whl || exit 1
  export PYTHONPATH=/tmp/site
  mkdir -p /tmp/icd
  echo /usr/local/nvidia/lib64/libnvidia-opencl.so.1 > /tmp/icd/nvidia.icd
  cp /etc/OpenCL/vendors/*.icd /tmp/icd/ 2>/dev/null || true
  export OCL_ICD_VENDORS=/tmp/icd
  python3 -c "import pyopencl as cl; print([(p.name, p.version, [(d.name, d.driver_version, d.local_mem_size) for d in p.get_devices()]) for p in cl.get_platforms()])"
  step torch; timeout 120 python3 $T/torch_mm.py $T/shapes.txt
  ARGS=(); while read -r lab cfg; do ARGS+=(-c "$cfg"); done < $T/configs.txt
  step sweep 4096; timeout 260 $P --size 4096 --runs 5 --rounds 2 --peak "${ARGS[@]}" | tee /tmp/sweep.log
  if [ $? -ne 0 ]; then
    step sweep fallback per config
    while read -r lab cfg; do echo "[$lab]"; timeout 30 $P --size 4096 --runs 5 --rounds 2 -c "$cfg"; done < $T/configs.txt | tee -a /tmp/sweep.log
  fi
  step rank; python3 $T/pick.py /tmp/sweep.log 4 > /tmp/top.txt; cat /tmp/top.txt
  TOP=(); while read -r lab cfg; do TOP+=(-c "$cfg"); done < /tmp/top.txt
  BASE="$(head -1 $T/configs.txt | cut -d' ' -f2-)"
  step confirm 4096; timeout 90 $P --size 4096 --runs 10 --rounds 3 "${TOP[@]}" -c "$BASE"
  step check-suite; timeout 120 $P --check-suite "${TOP[@]}"
  step check-im2col; timeout 60 $P --check-im2col
  step conv-shaped
  grep -v '^#' $T/shapes.txt | while read -r lab m n k b ta tb; do
    C=(); while read -r l cfg; do C+=(-c "$cfg TRANS_A=$ta TRANS_B=$tb"); done < <(cat /tmp/top.txt; head -1 $T/configs.txt)
    echo "[$lab]"; timeout 40 $P --mnk $m $n $k --batch $b --runs 10 --rounds 2 "${C[@]}"
  done
  step pilot bench
  s=$SECONDS
  BATCH=32 DIRECTIONS=all OVERHEAD=0 EXTRA="--layers 1,2" timeout 150 bash scripts/bench_gpu.sh run /tmp/pilot
  echo "pilot took $((SECONDS - s)) s"
  cp /tmp/pilot/*.md /tmp/pilot/*.json /tmp/pilot/environment.txt $OUT/ 2>/dev/null
  step done
}
main 2>&1 | tee $OUT/tune.log
