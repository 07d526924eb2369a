#!/usr/bin/env bash
# Issue 21's prefill small kernels on the GPU machine (docs/benchmarks.md, "Prefill small
# kernels"), one command: the GPU tests of the bundle, then bench_cuda_model --prefill 4096
# --profile on a random 9B for the bundle and a baseline binary in turns (base, new, base,
# new: the op profile before and after in one call), bench_prefill_gemm at 4K and 32K rows
# (cuBLAS's default against cuBLASLt's candidates), then --prefill 32768 for both (the new
# one with --profile).
# Bundle, on the workstation (build the baseline's bench_cuda_model first and keep a copy; the
# bundle script stages this script beside the bundle):
#   TARGETS="bench_cuda_model bench_prefill_gemm test_cuda_backend_ops_gpu test_cuda_model_gpu test_kernels_cuda_gpu" \
#     DEST=/work/main/.devbuild/small2 scripts/bench_serve_bundle.sh
#   xz -c OLD/bench_cuda_model > /work/main/.devbuild/small2/bench_cuda_model_base.xz
# then on the device, carrying .devbuild/small2: bash .devbuild/small2/prefill_small_gpu.sh
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
DEADLINE=${DEADLINE:-330}
OUT=${OUT:-/tmp/small_out}
R=/tmp/small_results
BUNDLE=${BUNDLE:-$HERE/bundle.tar.xz}
LONG=${LONG:-32768}
. "$HERE/serve_gpu_common.sh"
note "$(date -u); bundle commit $(tr '\n' ' ' < "$B/COMMIT"); $(nvidia-smi --query-gpu=name --format=csv,noheader)"
CKPT=/tmp/qwen35-9b-random
if [ ! -f "$CKPT/config.json" ]; then
  ( PYTHONUNBUFFERED=1 timeout 200 python3 "$HERE/make_random_checkpoint.py" --size 9b --out "$CKPT" ) > "$R/ckpt.log" 2>&1 &
  CK=$!
fi
TEST_TIMEOUT=${TEST_TIMEOUT:-150} gpu_tests test_cuda_backend_ops_gpu test_cuda_model_gpu test_kernels_cuda_gpu
[ -n "${CK:-}" ] && { wait "$CK"; note "checkpoint rc=$?"; }
BASE_BIN=/tmp/bench_cuda_model_base
xz -dc "$HERE/bench_cuda_model_base.xz" > "$BASE_BIN" && chmod +x "$BASE_BIN"
run() {  # label binary tokens [--profile]
  [ -f "$CKPT/config.json" ] && [ "$(left)" -gt 40 ] || { note "$1: skipped ($(left) s left)"; return; }
  timeout $(( $(left) - 20 )) "$2" --model "$CKPT" --batches 1 --contexts 1024 --prefill "$3" --steps 3 --layouts "" \
    ${4:-} > "$R/$1.txt" 2>&1
  note "$1 rc=$?: $(grep -E '^prefill [0-9]+ tokens' "$R/$1.txt" | tail -1) | $(grep -E '^\| *prefill 1' "$R/$1.txt" | tr -s ' ')"
}
for lab in base new base2 new2; do
  bin=$B/bin/bench_cuda_model; case $lab in base*) bin=$BASE_BIN;; esac
  run "${lab}_4096" "$bin" 4096 --profile
done
for lab in base new; do
  note "profile ${lab}_4096:"; sed -n '/^profile: prefill/,/total/p' "$R/${lab}_4096.txt" >> "$summary"
done
if [ -x "$B/bin/bench_prefill_gemm" ] && [ "$(left)" -gt 60 ]; then
  for m in 4096 $LONG; do
    timeout 60 "$B/bin/bench_prefill_gemm" --tokens "$m" --candidates 12 --iters 10 > "$R/gemm_$m.txt" 2>&1
    note "gemm shapes, M = $m (rc=$?):"; cat "$R/gemm_$m.txt" >> "$summary"
  done
fi
for n in $LONG; do
  run "new_$n" "$B/bin/bench_cuda_model" "$n" --profile
  run "base_$n" "$BASE_BIN" "$n"
  note "profile new_$n:"; sed -n '/^profile: prefill/,/total/p' "$R/new_$n.txt" >> "$summary"
done
echo "==== summary"; cat "$summary"
