# Device-side comparison of the large GPU tile set with 64x64-class sets on ResNet-50 GEMMs.
# Run from the repository root on the H200 with build/gpu_wheels carried.
set -o pipefail
export PYTHONUNBUFFERED=1
pip install -q --no-index --no-deps --no-compile --target /tmp/site build/gpu_wheels/cp312/*.whl || exit 1
export PYTHONPATH=/tmp/site
mkdir -p /tmp/icd; echo /usr/local/nvidia/lib64/libnvidia-opencl.so.1 > /tmp/icd/nvidia.icd; export OCL_ICD_VENDORS=/tmp/icd
P="python3 plugins/gemm/tools/gemm_probe.py --device NVIDIA --quiet 0 --runs 10"
BIG="USE_LOCAL=1 MR=1 WGD_M=16 WGD_N=8 TM=8 TN=16 VW=4 VWM=4 KWG=8 DOUBLE_BUF=1 LPAD=4"
S1="USE_LOCAL=1 MR=1 WGD_M=16 WGD_N=16 TM=4 TN=4 VW=4 VWM=4 KWG=16 DOUBLE_BUF=1 LPAD=4"
S2="USE_LOCAL=1 MR=1 WGD_M=16 WGD_N=16 TM=4 TN=4 VW=4 VWM=4 KWG=8 DOUBLE_BUF=1 LPAD=4"
S3="USE_LOCAL=1 MR=1 WGD_M=8 WGD_N=16 TM=8 TN=4 VW=4 VWM=4 KWG=16 DOUBLE_BUF=1 LPAD=4"
S4="USE_LOCAL=1 MR=1 WGD_M=16 WGD_N=8 TM=4 TN=8 VW=4 VWM=4 KWG=16 DOUBLE_BUF=1 LPAD=4"
S5="USE_LOCAL=1 MR=1 WGD_M=8 WGD_N=8 TM=8 TN=8 VW=4 VWM=4 KWG=16 DOUBLE_BUF=1 LPAD=4"
while read -r label M N K B TA TB; do
  case "$label" in \#*) continue;; esac
  echo "== $label"
  $P --mnk $M $N $K --batch $B -c "$BIG TRANS_A=$TA TRANS_B=$TB" -c "$S1 TRANS_A=$TA TRANS_B=$TB" -c "$S2 TRANS_A=$TA TRANS_B=$TB" -c "$S3 TRANS_A=$TA TRANS_B=$TB" -c "$S4 TRANS_A=$TA TRANS_B=$TB" -c "$S5 TRANS_A=$TA TRANS_B=$TB" 2>&1 | grep -E "GFLOP|FAIL|rror"
done <<'SHAPES'
fwd.1x1_64x3136x64 64 3136 64 32 0 0
fwd.1x1_2048x49x512 2048 49 512 32 0 0
fwd.1x1_512x49x2048 512 49 2048 32 0 0
fwd.1x1_256x196x1024 256 196 1024 32 0 0
fwd.1x1_1024x196x256 1024 196 256 32 0 0
fwd.3x3_64x3136x576 64 3136 576 32 0 0
fwd.3x3_512x49x4608 512 49 4608 32 0 0
wrw.1x1_64x64x3136 64 64 3136 32 0 1
wrw.1x1_256x1024x196 256 1024 196 32 0 1
wrw.3x3_64x576x3136 64 576 3136 32 0 1
bwd.1x1_64x3136x256 64 3136 256 32 1 0
SHAPES
$P --check-suite -c "$S1" -c "$S3" 2>&1 | tail -3
