#!/usr/bin/env bash
# The GPU tests of a bundle, on the GPU machine, in one command: the test binaries the bundle
# has (test_cuda_backend_ops_gpu, test_cuda_model_gpu, test_kernels_cuda_gpu without its [long]
# and [bigpool] cases), the engine tests on the CUDA backend (test_engine_tiny with
# DELTASERVE_TEST_BACKEND=cuda), and refcheck --backend cuda on the bf16 and FP8 fixtures, whole
# prompt and in chunks of 7. One summary line each.
# Bundle: TARGETS="test_cuda_backend_ops_gpu test_cuda_model_gpu test_kernels_cuda_gpu test_engine_tiny refcheck"
#   DEST=.devbuild/<dir> scripts/bench_serve_bundle.sh, carried; then [DEADLINE=300] bash .devbuild/<dir>/gpu_tests_gpu.sh
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
DEADLINE=${DEADLINE:-300}
OUT=${OUT:-/tmp/gt_out}
R=/tmp/gt_results
BUNDLE=${BUNDLE:-$HERE/bundle.tar.xz}
. "$HERE/serve_gpu_common.sh"
note "$(date -u); bundle commit $(tr '\n' ' ' < "$B/COMMIT"); $(nvidia-smi --query-gpu=name --format=csv,noheader)"
gpu_tests test_cuda_backend_ops_gpu test_cuda_model_gpu
if [ -x "$B/bin/test_kernels_cuda_gpu" ]; then
  timeout 200 "$B/bin/test_kernels_cuda_gpu" "~[long]~[bigpool]" > "$R/test_kernels_cuda_gpu.txt" 2>&1
  note "test_kernels_cuda_gpu ~[long]~[bigpool] rc=$?: $(grep -E 'test cases|passed|failed' "$R/test_kernels_cuda_gpu.txt" | tail -2 | tr '\n' ' ')"
fi
if [ -x "$B/bin/test_engine_tiny" ]; then
  DELTASERVE_TEST_BACKEND=cuda timeout 240 "$B/bin/test_engine_tiny" > "$R/test_engine_tiny_cuda.txt" 2>&1
  note "test_engine_tiny (cuda) rc=$?: $(grep -E 'test cases|passed|failed' "$R/test_engine_tiny_cuda.txt" | tail -2 | tr '\n' ' ')"
fi
if [ -x "$B/bin/refcheck" ]; then
  for model in tiny-qwen35 tiny-qwen35-fp8; do
    for chunk in whole 7; do
      log="$R/refcheck_${model}_$chunk.txt"
      timeout 60 "$B/bin/refcheck" --model "tests/data/$model" --backend cuda \
        $([ $chunk = whole ] || echo --chunk $chunk) > "$log" 2>&1
      note "refcheck $model cuda $chunk rc=$?: $(grep -E '^refcheck: ' "$log" | tail -1)"
    done
  done
  Y=tests/data/tiny-qwen35-yarn  # tiny-qwen35 under its hf_overrides.json (YaRN), when present
  if [ -f "$Y/reference.safetensors" ]; then
    for chunk in whole 7; do
      log="$R/refcheck_yarn_$chunk.txt"
      timeout 60 "$B/bin/refcheck" --model tests/data/tiny-qwen35 --reference "$Y/reference.safetensors" \
        --hf-overrides-file "$Y/hf_overrides.json" --backend cuda $([ $chunk = whole ] || echo --chunk $chunk) > "$log" 2>&1
      note "refcheck tiny-qwen35-yarn cuda $chunk rc=$?: $(grep -E '^refcheck: ' "$log" | tail -1)"
    done
  fi
fi
echo "==== summary"; cat "$summary"
