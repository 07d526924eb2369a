#!/usr/bin/env bash
# FP8-resident weights on the GPU machine (issue 22; docs/benchmarks.md, "FP8 weights on the
# H200"), one command:
#  1. the GPU tests: test_cuda_backend_ops_gpu (FP8 GEMV / skinny / tiled cuBLAS against an f64
#     reference, and every other op) and test_cuda_model_gpu (the tiny model with
#     --quantization fp8 against the CPU engine and the HF fixture, and the bf16 cases);
#     then, when the bundle has refcheck, refcheck on tests/data/tiny-qwen35-fp8 with --backend
#     cuda (FP8 weights resident), whole and in chunks of 7, at the backend's default tolerance;
#  2. bench_cuda_model on a random checkpoint of SIZE (9b) in bf16 and in Qwen's FP8 layout
#     (make_random_checkpoint.py --fp8, generated alongside), one after the other with the same
#     BENCH_ARGS; a table of both, side by side, last.
# Bundle: TARGETS="test_cuda_backend_ops_gpu test_cuda_model_gpu bench_cuda_model refcheck" DEST=.devbuild/<dir>
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
# An A/B on the FP8 checkpoint: the run above against the same with AB_FLAGS, e.g. the skinny
# kernel's 9-64-row range against cuBLAS over dequantised tiles (--fp8-skinny-rows 8) or the
# one-row tensor-core kernel against the warp-per-row GEMV (--fp8-warp-gemv, the default);
# AB_ARGS="" skips it.
AB_ARGS=${AB_ARGS:---batches 1 --contexts 1024 --prefill 0 --layout-batch 0 --steps 10}
AB_FLAGS=${AB_FLAGS:---fp8-warp-gemv}
# The op-level table of bench_fp8_gemm (when the bundle has it), after its layout probe.
FP8_GEMM_ARGS=${FP8_GEMM_ARGS:-}
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
if [ -x "$B/bin/bench_fp8_gemm" ]; then
  timeout 150 "$B/bin/bench_fp8_gemm" --probe $FP8_GEMM_ARGS > "$R/bench_fp8_gemm.txt" 2>&1
  note "bench_fp8_gemm rc=$?: $(grep -c MATCH "$R/bench_fp8_gemm.txt") layout matches"
  grep -E 'probe|^\| [0-9]' "$R/bench_fp8_gemm.txt" | tee -a "$summary"
fi
if [ -x "$B/bin/refcheck" ]; then
  for chunk in whole 7; do
    log="$R/refcheck_fp8_cuda_$chunk.log"
    timeout 60 "$B/bin/refcheck" --model tests/data/tiny-qwen35-fp8 --backend cuda \
      $([ $chunk = whole ] || echo --chunk $chunk) > "$log" 2>&1
    note "refcheck tiny-qwen35-fp8 cuda $chunk rc=$?: $(grep -E '^refcheck: ' "$log" | tail -1)"
  done
fi
wait
note "checkpoints: $(tail -qn1 "$R"/ckpt_*.log | tr '\n' ' ')"
for kind in bf16 fp8; do
  [ "$(left)" -gt 30 ] || { note "no time left for $kind"; continue; }
  eval "timeout $(( $(left) - 10 )) \"$B/bin/bench_cuda_model\" --model /tmp/ckpt-$SIZE-$kind $BENCH_ARGS" \
    > "$R/bench_$kind.txt" 2>&1
  note "bench $kind rc=$?: $(grep -E '^(gpu|weights)' "$R/bench_$kind.txt" | tr '\n' ' ')"
done
# AB2_FLAGS (optional): a second A/B with the same AB_ARGS.
for ab in "$AB_FLAGS" ${AB2_FLAGS:+"$AB2_FLAGS"}; do
  [ -n "$AB_ARGS" ] && [ "$(left)" -gt 40 ] || continue
  tag=$(echo "$ab" | tr -c 'a-z0-9\n' '_')
  eval "timeout $(( $(left) - 10 )) \"$B/bin/bench_cuda_model\" --model /tmp/ckpt-$SIZE-fp8 $AB_ARGS $ab" \
    > "$R/bench_fp8_ab$tag.txt" 2>&1
  note "fp8, $ab: $(grep -E '^\| (decode|prefill)' "$R/bench_fp8_ab$tag.txt" | tr -s ' ' | tr '\n' ' ')"
done
note ""
note "| measurement | bf16 tok/s | bf16 of floor | fp8 tok/s | fp8 of floor | fp8 / bf16 |"
note "|---|---|---|---|---|---|"
LC_ALL=C join -t'|' -j 2 <(grep -E '^\| (decode|prefill)' "$R/bench_bf16.txt" | LC_ALL=C sort -t'|' -k2,2) \
  <(grep -E '^\| (decode|prefill)' "$R/bench_fp8.txt" | LC_ALL=C sort -t'|' -k2,2) |
  awk -F'|' '{ printf "| %s | %s | %s | %s | %s | %.2fx |\n", $1, $3, $5, $8, $10, $8 / $3 }' | sed 's/  */ /g' |
  tee -a "$summary"
cp "$R"/*.txt "$R"/*.log "$OUT/" 2>/dev/null
