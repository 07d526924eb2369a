#!/usr/bin/env bash
# CUDA graphs for decode and verify steps on the GPU machine (issue 24; docs/benchmarks.md,
# "CUDA graphs"), one command:
#  1. tests: test_cuda_model_gpu "[graphs]" (replays against the same padded steps run
#     eagerly, bit for bit; padded batches, changing tables and widths, verify steps, a
#     bystander's state) and the engine on the tiny fixture on CUDA, "[graphs]" (on vs off,
#     plain, ngram and replay drafts);
#  2. bench_cuda_model --graphs on,off: plain decode at batch 1-64 (BATCHES), context CONTEXT,
#     on a random checkpoint of SIZE (9b);
#  3. bench_speculative --method mtp K=3 a=0.8 at batch 1 and 32, graphs on and off;
#  4. with the time left: the rest of test_cuda_model_gpu, and test_engine_tiny "[batch]",
#     "[speculative]" and "[mtp]" on CUDA (graphs on, the engine's default).
# Short tables last in $OUT/summary.txt; every log in $OUT/results.tar.gz.
# Bundle (here, in the lead's checkout):
#   TARGETS="test_cuda_model_gpu test_engine_tiny bench_cuda_model bench_speculative" \
#     DEST=/work/main/.devbuild/cuda-graphs scripts/bench_serve_bundle.sh
# then, carried: bash .devbuild/cuda-graphs/cuda_graphs_gpu.sh
#   [SIZE=9b] [BATCHES=1,2,4,8,16,32,64] [CONTEXT=1024] [STEPS=20] [DEADLINE=470]
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
DEADLINE=${DEADLINE:-470}
OUT=${OUT:-/tmp/graphs_out}
R=/tmp/graphs_results
BUNDLE=${BUNDLE:-$HERE/bundle.tar.xz}
SIZE=${SIZE:-9b}
BATCHES=${BATCHES:-1,2,4,8,16,32,64}
CONTEXT=${CONTEXT:-1024}
STEPS=${STEPS:-20}
. "$HERE/serve_gpu_common.sh"
note "$(date -u); bundle commit $(tr '\n' ' ' < "$B/COMMIT"); $(nvidia-smi --query-gpu=name --format=csv,noheader)"
export DELTASERVE_TEST_DATA_DIR=$PWD/tests/data
CKPT=/tmp/qwen35-$SIZE-random
if [ ! -f "$CKPT/config.json" ]; then
  ( PYTHONUNBUFFERED=1 timeout 300 python3 "$HERE/make_random_checkpoint.py" --size "$SIZE" --out "$CKPT" &&
    timeout 60 python3 "$HERE/make_checkpoint_tokenizer.py" --out "$CKPT" ) > "$R/ckpt.log" 2>&1 &
fi
tests_line() { grep -E '^(All tests passed|test cases:)' "$1" | tr '\n' ' '; }
# The recorded path's own tests first (the checkpoint is written meanwhile), the benchmarks,
# then the other GPU tests with the time left.
# No -s: its listing of every passed check is long; the test prints its numbers itself.
timeout 240 "$B/bin/test_cuda_model_gpu" "[graphs]" > "$R/test_graphs_model.log" 2>&1
note "test_cuda_model_gpu [graphs] rc=$?: $(tests_line "$R/test_graphs_model.log")"
grep -E "worst relative logit|replayed .* failed|differ, first at|FAILED" "$R/test_graphs_model.log" | sort -u | head -12 | tee -a "$summary"
DELTASERVE_TEST_BACKEND=cuda timeout 120 "$B/bin/test_engine_tiny" "[graphs]" -s > "$R/test_engine_graphs.log" 2>&1
note "test_engine_tiny [graphs] on cuda rc=$?: $(tests_line "$R/test_engine_graphs.log")"
grep -E "token-identical with graphs" "$R/test_engine_graphs.log" | sort | uniq -c | tee -a "$summary"
wait
[ -f "$CKPT/config.json" ] || { note "checkpoint failed: $(tail -2 "$R/ckpt.log" | tr '\n' ' ')"; exit 1; }
note "checkpoint ready ($(left) s left)"

timeout $(( $(left) < 180 ? $(left) - 20 : 160 )) "$B/bin/bench_cuda_model" --model "$CKPT" --graphs on,off \
  --batches "$BATCHES" --contexts "$CONTEXT" --prefill 0 --layout-batch 0 --steps "$STEPS" > "$R/bench_cuda_model.txt" 2>&1
note "bench_cuda_model rc=$? ($(left) s left): $(grep -E '^(gpu|step graphs)' "$R/bench_cuda_model.txt" | tr '\n' ' ')"
[ "$(left)" -gt 40 ] &&
  timeout $(( $(left) < 180 ? $(left) - 20 : 160 )) "$B/bin/bench_speculative" --model "$CKPT" --backend cuda \
    --method mtp --batches 1,8,32 --ks 3 --acceptance 0.8 --prompt-len 256 --output-len 128 --repeat 1 \
    --kv-cache-memory 16GiB --graphs on,off > "$R/bench_speculative.txt" 2>&1
note "bench_speculative rc=$? ($(left) s left)"
[ "$(left)" -gt 40 ] && timeout $(( $(left) - 30 )) "$B/bin/test_cuda_model_gpu" "~[graphs]" > "$R/test_cuda_model.log" 2>&1
note "test_cuda_model_gpu (the rest) rc=$?: $(tests_line "$R/test_cuda_model.log")"
for case in batch speculative mtp; do
  [ "$(left)" -gt 30 ] || { note "no time left for test_engine_tiny [$case]"; continue; }
  DELTASERVE_TEST_BACKEND=cuda timeout $(( $(left) - 20 )) "$B/bin/test_engine_tiny" "[$case]" > "$R/test_engine_$case.log" 2>&1
  note "test_engine_tiny [$case] on cuda rc=$?: $(tests_line "$R/test_engine_$case.log")"
done
note ""
note "plain decode, $SIZE random, context $CONTEXT (bench_cuda_model --graphs on,off):"
grep -A20 '^| decode batch | context | eager' "$R/bench_cuda_model.txt" | grep '^|' | tee -a "$summary"
note ""
note "bench_speculative --method mtp K=3 a=0.8 (K 0 = plain decoding):"
grep -A12 '^| batch | K | acceptance | eager' "$R/bench_speculative.txt" | grep '^|' | tee -a "$summary"
grep -E ' tok/s ' "$R/bench_speculative.txt" | tee -a "$summary"
cp "$R"/*.txt "$OUT/" 2>/dev/null
