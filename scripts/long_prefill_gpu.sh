#!/usr/bin/env bash
# Long prompts on the GPU machine (docs/benchmarks.md, "Long prompts"), one command, random 9B:
#  1. bench_cuda_model --prefill N for each N in PREFILLS (one sequence, one step, median of 3,
#     tokens/s against the FLOP floor);
#  2. serve with its defaults (--gpu-memory-utilization 0.9, 2,048-token steps) and
#     --max-ctx 131072, then one completion of LONG_INPUT random ids (bench_serve): does a 128K
#     prompt fit the default memory budget, and how long its chunked prefill takes (TTFT).
# Bundle: scripts/bench_serve_bundle.sh with TARGETS="serve bench_serve bench_cuda_model", carried.
#   [PREFILLS="32768 131072"] [LONG_INPUT=130000] [DEADLINE=500] bash .devbuild/<dir>/long_prefill_gpu.sh
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
DEADLINE=${DEADLINE:-500}
OUT=${OUT:-/tmp/long_out}
R=/tmp/long_results
BUNDLE=${BUNDLE:-$HERE/bundle.tar.xz}
PREFILLS=${PREFILLS:-32768 131072}
LONG_INPUT=${LONG_INPUT:-130000}
PORT=18095
. "$HERE/serve_gpu_common.sh"
note "$(date -u); bundle commit $(tr '\n' ' ' < "$B/COMMIT"); $(nvidia-smi --query-gpu=name --format=csv,noheader)"
CKPT=/tmp/qwen35-9b-random
if [ ! -f "$CKPT/config.json" ]; then
  ( PYTHONUNBUFFERED=1 timeout 200 python3 "$HERE/make_random_checkpoint.py" --size 9b --out "$CKPT" &&
    timeout 60 python3 "$HERE/make_checkpoint_tokenizer.py" --out "$CKPT" ) > "$R/ckpt.log" 2>&1 ||
    { note "checkpoint failed: $(tail -2 "$R/ckpt.log")"; exit 1; }
fi
for n in $PREFILLS; do
  [ "$(left)" -gt 60 ] || { note "no time left for prefill $n"; continue; }
  timeout $(( $(left) - 40 )) "$B/bin/bench_cuda_model" --model "$CKPT" --batches 1 --contexts 1024 --prefill "$n" \
    --steps 3 --layouts "" > "$R/prefill_$n.txt" 2>&1
  note "prefill $n rc=$?: $(grep -E '^prefill [0-9]|^\| *prefill' "$R/prefill_$n.txt" | tr '\n' ' ')"
done
if [ "$LONG_INPUT" -gt 0 ] && [ "$(left)" -gt 90 ]; then
  "$B/bin/serve" --model "$CKPT" --backend cuda --port $PORT --max-ctx 131072 > "$R/serve.log" 2>&1 &
  pid=$!
  until curl -sf -m 2 http://127.0.0.1:$PORT/health > /dev/null; do
    kill -0 $pid 2>/dev/null || { note "serve exited: $(tail -3 "$R/serve.log" | tr '\n' ' ')"; break; }
    sleep 1
  done
  note "serve: $(grep -E 'K/V cache|concurrency' "$R/serve.log" | cut -c1-200 | tr '\n' ' ')"
  timeout $(( $(left) - 20 )) "$B/bin/bench_serve" --base-url http://127.0.0.1:$PORT --endpoint /v1/completions \
    --no-progress --dataset random --random-vocab-size 151643 --random-input-len "$LONG_INPUT" --random-output-len 16 \
    --ignore-eos --num-prompts 1 --max-concurrency 1 --result-json "$R/long.json" > "$R/long.txt" 2>&1
  note "long prompt rc=$?: $(grep -iE 'TTFT|failed|completed' "$R/long.txt" | head -4 | tr '\n' ' ')"
  kill $pid 2>/dev/null; wait $pid 2>/dev/null
fi
echo "==== summary"; cat "$summary"
