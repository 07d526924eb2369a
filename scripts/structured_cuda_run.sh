#!/usr/bin/env bash
# On the GPU machine, from the repository root (the bundle of scripts/structured_cuda_bundle.sh
# beside this script): the CUDA sampler against the CPU sampler ("[cuda_sampler]", token masks
# included), then the structured-generation suite on the tiny model through the CUDA backend
# and its sampler (bf16 as served, and f32 weights). Logs under $OUT, a summary last.
#   [DEADLINE=s] [BACKENDS="cuda cuda-f32"] bash .devbuild/cuda-masks/structured_cuda_run.sh
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
START=$SECONDS
DEADLINE=${DEADLINE:-300}
left() { echo $((DEADLINE - (SECONDS - START))); }
OUT=${OUT:-/tmp/masks_out}
mkdir -p "$OUT"
summary="$OUT/masks_summary.txt"; : > "$summary"
note() { echo "$*" | tee -a "$summary"; }
B=/tmp/dsmasks
rm -rf "$B"; mkdir -p "$B"
xz -dc "$HERE/bundle.tar.xz" | tar -C "$B" -xf - || { echo "cannot unpack $HERE/bundle.tar.xz"; exit 1; }
CUBLAS=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
         $(python3 -c 'import nvidia.cublas, os; print(os.path.dirname(nvidia.cublas.__file__) + "/lib")' 2>/dev/null); do
  [ -e "$d/libcublas.so.13" ] && { CUBLAS=$d; break; }
done
export LD_LIBRARY_PATH="$B/lib:$CUBLAS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The fixtures: the checkout's tiny checkpoint, the bundle's grammar data and schema suite.
mkdir -p "$B/testdata"
ln -sfn "$PWD/tests/data/tiny-qwen35" "$B/testdata/tiny-qwen35"
ln -sfn "$B/data/grammar" "$B/testdata/grammar"
export DELTASERVE_TEST_DATA_DIR="$B/testdata" JSON_SCHEMA_TEST_SUITE_DIR="$B/json-schema-test-suite"
note "bundle commit $(tr '\n' ' ' < "$B/COMMIT"); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"

timeout $(left) "$B/bin/test_cuda_backend_ops_gpu" "[cuda_sampler]" -r compact > "$OUT/masks_sampler.log" 2>&1
note "test_cuda_backend_ops_gpu [cuda_sampler] rc=$? $(grep -E '^(Passed|Failed)|test cases' "$OUT/masks_sampler.log" | tail -1)"
for be in ${BACKENDS:-cuda cuda-f32}; do
  t=$(left); [ "$t" -gt 10 ] || { note "no time for the structured suite on $be"; continue; }
  s=$SECONDS
  DELTASERVE_TEST_BACKEND=$be timeout "$t" "$B/bin/test_structured_generation" -r compact > "$OUT/masks_structured_$be.log" 2>&1
  rc=$?
  note "test_structured_generation on $be rc=$rc in $((SECONDS - s)) s: $(grep -E '^(Passed|Failed)|test cases' "$OUT/masks_structured_$be.log" | tail -1) $(grep -o 'structured generation: .*' "$OUT/masks_structured_$be.log" | tail -1)"
done
echo "==== summary"; cat "$summary"
