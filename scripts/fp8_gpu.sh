#!/usr/bin/env bash
# FP8-resident weights on the GPU machine (issue 22; docs/benchmarks.md, "FP8 weights on the
# H200"), one command:
#  1. the GPU tests: test_cuda_backend_ops_gpu (FP8 GEMV / skinny / tiled cuBLAS against an f64
#     reference, and every other op) and test_cuda_model_gpu (the tiny model with
#     --quantization fp8 against the CPU engine and the HF fixture, and the bf16 cases);
#  2. bench_cuda_model on a random checkpoint of SIZE (9b) in bf16 and in Qwen's FP8 layout
#     (make_random_checkpoint.py --fp8, generated alongside), one after the other with the same
#     BENCH_ARGS; a table of both, side by side, last.
# Bundle: TARGETS="test_cuda_backend_ops_gpu test_cuda_model_gpu bench_cuda_model" DEST=.devbuild/<dir>
#   scripts/bench_serve_bundle.sh, carried; then [SIZE=9b] [BENCH_ARGS=...] [DEADLINE=330]
#   bash .devbuild/<dir>/fp8_gpu.sh
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
DEADLINE=${DEADLINE:-330}
OUT=${OUT:-/tmp/fp8_out}
R=/tmp/fp8_results
BUNDLE=${BUNDLE:-$HERE/bundle.tar.xz}
SIZE=${SIZE:-9b}
BENCH_ARGS=${BENCH_ARGS:---batches 1,8,16,32,64 --contexts 1024 --prefill 4096 --layout-batch 0 --steps 10}
# The A/B of the FP8 skinny kernel's 9-64-row range (the FP8 run above) against cuBLAS over
# dequantised tiles (--fp8-skinny-rows AB_ROWS), same checkpoint; AB_ARGS="" skips it.
AB_ARGS=${AB_ARGS:---batches 16,32,64 --contexts 1024 --prefill 0 --layout-batch 0 --steps 10}
AB_ROWS=${AB_ROWS:-8}
. "$HERE/serve_gpu_common.sh"
note "$(date -u); bundle commit $(tr '\n' ' ' < "$B/COMMIT"); $(nvidia-smi --query-gpu=name --format=csv,noheader)"
export DELTASERVE_TEST_DATA_DIR=$PWD/tests/data
for kind in bf16 fp8; do
  flag=""; [ $kind = fp8 ] && flag=--fp8
  PYTHONUNBUFFERED=1 timeout 200 python3 "$HERE/make_random_checkpoint.py" --size "$SIZE" $flag \
    --out "/tmp/ckpt-$SIZE-$kind" > "$R/ckpt_$kind.log" 2>&1 &
done
for t in test_cuda_backend_ops_gpu test_cuda_model_gpu; do
  timeout 150 "$B/bin/$t" > "$R/$t.log" 2>&1
  note "$t rc=$?: $(grep -E '^(All tests passed|test cases:)' "$R/$t.log" | tr '\n' ' ')"
done
wait
note "checkpoints: $(tail -qn1 "$R"/ckpt_*.log | tr '\n' ' ')"
for kind in bf16 fp8; do
  [ "$(left)" -gt 30 ] || { note "no time left for $kind"; continue; }
  eval "timeout $(( $(left) - 10 )) \"$B/bin/bench_cuda_model\" --model /tmp/ckpt-$SIZE-$kind $BENCH_ARGS" \
    > "$R/bench_$kind.txt" 2>&1
  note "bench $kind rc=$?: $(grep -E '^(gpu|weights)' "$R/bench_$kind.txt" | tr '\n' ' ')"
done
if [ -n "$AB_ARGS" ] && [ "$(left)" -gt 40 ]; then
  for rows in $AB_ROWS; do
    eval "timeout $(( $(left) - 10 )) \"$B/bin/bench_cuda_model\" --model /tmp/ckpt-$SIZE-fp8 $AB_ARGS --fp8-skinny-rows $rows" \
      > "$R/bench_fp8_skinny$rows.txt" 2>&1
    note "fp8, --fp8-skinny-rows $rows: $(grep -E '^\| decode' "$R/bench_fp8_skinny$rows.txt" | tr -s ' ' | tr '\n' ' ')"
  done
fi
note ""
note "| measurement | bf16 tok/s | bf16 of floor | fp8 tok/s | fp8 of floor | fp8 / bf16 |"
note "|---|---|---|---|---|---|"
LC_ALL=C join -t'|' -j 2 <(grep -E '^\| (decode|prefill)' "$R/bench_bf16.txt" | LC_ALL=C sort -t'|' -k2,2) \
  <(grep -E '^\| (decode|prefill)' "$R/bench_fp8.txt" | LC_ALL=C sort -t'|' -k2,2) |
  awk -F'|' '{ printf "| %s | %s | %s | %s | %s | %.2fx |\n", $1, $3, $5, $8, $10, $8 / $3 }' | sed 's/  */ /g' |
  tee -a "$summary"
cp "$R"/*.txt "$R"/*.log "$OUT/" 2>/dev/null
