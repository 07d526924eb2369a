#!/usr/bin/env bash
# 256K- and 1M-token prompts through serve on the GPU machine (issue 48; docs/benchmarks.md,
# "1M-token context"), one command, random 9B under YaRN:
#  1. the random 9B checkpoint (make_random_checkpoint.py + make_checkpoint_tokenizer.py);
#  2. bench_cuda_model's ceilings (copy GB/s, bf16 GEMM TFLOP/s) and one short decode, for the floors;
#  3. serve --max-ctx 1048576 --hf-overrides (YaRN factor 4 over the released 262,144 positions,
#     as Qwen's model card sets it for 1M tokens), K/V in bf16 (the backend's default: 32 KiB a
#     token on the 9B, 32 GiB for 1M tokens, which one H200 holds beside the 18 GiB of weights),
#     --max-num-batched-tokens STEP_TOKENS; then, one at a time, a completion of each of PROMPTS
#     random-id prompt lengths with OUTPUT_LEN tokens (--ignore-eos): TTFT and the decode rate at
#     that context. GPU memory is sampled by nvidia-smi throughout;
#  4. long_context_report.py: a table of TTFT against the FLOP floor (2 x weights x tokens +
#     the causal attention's 4 x heads x head_dim x T^2 / 2 per attention layer) and decode
#     tok/s against the bytes floor (weights + the context's K/V + the DeltaNet state per step),
#     over the measured ceilings, with the K/V pool and peak memory ($OUT/summary.txt, and
#     $OUT/long_context.json).
# Bundle: TARGETS="serve bench_serve bench_cuda_model" DEST=/work/main/.devbuild/long-context \
#   scripts/bench_serve_bundle.sh here, carried; there from the repository root:
#   [PROMPTS="262016 1048448"] [OUTPUT_LEN=64] [STEP_TOKENS=8192] [DEADLINE=590] \
#     bash .devbuild/long-context/long_context_gpu.sh
# Time: the attention floor alone is ~92 s at 1M tokens (7.2e16 FLOPs), so expect the 1M prompt
# to take minutes; run the two lengths as two calls on the same warm machine (the checkpoint
# in /tmp is made once): PROMPTS=262016 first, then PROMPTS=1048448.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
DEADLINE=${DEADLINE:-590}
OUT=${OUT:-/tmp/long_context_out}
R=/tmp/long_context_results
BUNDLE=${BUNDLE:-$HERE/bundle.tar.xz}
PROMPTS=${PROMPTS:-262016 1048448}
OUTPUT_LEN=${OUTPUT_LEN:-64}
STEP_TOKENS=${STEP_TOKENS:-8192}
MAX_CTX=${MAX_CTX:-1048576}
PORT=18096
YARN='{"text_config": {"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 262144}}}'
. "$HERE/serve_gpu_common.sh"
note "$(date -u); bundle commit $(tr '\n' ' ' < "$B/COMMIT"); $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader)"
CKPT=/tmp/qwen35-9b-random
if [ ! -f "$CKPT/config.json" ]; then
  ( PYTHONUNBUFFERED=1 timeout 200 python3 "$HERE/make_random_checkpoint.py" --size 9b --out "$CKPT" &&
    timeout 60 python3 "$HERE/make_checkpoint_tokenizer.py" --out "$CKPT" ) > "$R/ckpt.log" 2>&1 ||
    { note "checkpoint failed: $(tail -2 "$R/ckpt.log")"; exit 1; }
fi
note "checkpoint ready at $((SECONDS - START)) s"

# Ceilings for the floors (and a decode point at a short context, for scale).
timeout 120 "$B/bin/bench_cuda_model" --model "$CKPT" --batches 1 --contexts 1024 --prefill 0 --steps 5 \
  --layouts "" --graphs on > "$R/ceilings.txt" 2>&1
note "bench_cuda_model rc=$?: $(grep -E '^(gpu |weights: |decode )' "$R/ceilings.txt" | head -3 | tr '\n' ' ')"

nvidia-smi --query-gpu=timestamp,memory.used,power.draw,clocks.sm --format=csv,noheader -lms 500 > "$R/smi.csv" 2>&1 &
smi=$!
"$B/bin/serve" --model "$CKPT" --backend cuda --port $PORT --max-ctx "$MAX_CTX" --hf-overrides "$YARN" \
  --max-num-batched-tokens "$STEP_TOKENS" --max-num-seqs 8 > "$R/serve.log" 2>&1 &
pid=$!
until curl -sf -m 2 http://127.0.0.1:$PORT/health > /dev/null; do
  kill -0 $pid 2>/dev/null || { note "serve exited: $(tail -3 "$R/serve.log" | tr '\n' ' ')"; break; }
  [ "$(left)" -gt 30 ] || { note "serve not up in time"; break; }
  sleep 1
done
note "serve: $(grep -E 'RoPE|K/V cache|max-ctx|budget' "$R/serve.log" | cut -c1-220 | tr '\n' ' ')"
for n in $PROMPTS; do
  [ "$(left)" -gt 40 ] || { note "no time left for the $n-token prompt"; continue; }
  timeout $(( $(left) - 25 )) "$B/bin/bench_serve" --base-url http://127.0.0.1:$PORT --endpoint /v1/completions \
    --no-progress --dataset random --random-vocab-size 151643 --random-input-len "$n" --random-output-len "$OUTPUT_LEN" \
    --ignore-eos --num-prompts 1 --max-concurrency 1 --result-json "$R/prompt_$n.json" > "$R/prompt_$n.txt" 2>&1
  note "prompt $n rc=$?: $(grep -iE 'TTFT|TPOT|failed|completed' "$R/prompt_$n.txt" | head -5 | tr '\n' ' ')"
done
curl -s -m 5 http://127.0.0.1:$PORT/metrics > "$R/metrics.txt" 2>&1
kill $pid 2>/dev/null; wait $pid 2>/dev/null
kill $smi 2>/dev/null; wait $smi 2>/dev/null
python3 "$HERE/long_context_report.py" --checkpoint "$CKPT" --ceilings "$R/ceilings.txt" --serve-log "$R/serve.log" \
  --smi "$R/smi.csv" --json "$OUT/long_context.json" "$R"/prompt_*.json >> "$summary" 2>&1 || note "report failed"
tail -20 "$summary"
