#!/usr/bin/env bash
# Prefix caching on the GPU machine (docs/benchmarks.md, "Prefix caching"), in one command:
#   1. the prefix-cache equality tests of the engine on the CUDA backend (bf16 and f32
#      weights): test_engine_tiny "[prefix]";
#   2. the random 9B (or SIZE=27b) checkpoint (make_random_checkpoint.py +
#      make_checkpoint_tokenizer.py);
#   3. serve with prefix caching on, then off, the same bench_serve runs against each:
#      (a) multi-turn chat: 32 conversations x 8 turns, ~1,700-token system prompt, ~270-token
#          user messages, 200-token replies (TTFT per turn);
#      (b) 64 requests sharing a 4,000-token prefix plus 100 unique tokens (TTFT);
#      (c) no reuse: random 1,024-token prompts, 256 out, concurrency 64 (throughput).
# The binaries come from scripts/bench_serve_bundle.sh with TARGETS including test_engine_tiny,
# staged in .devbuild/prefix (carry it). Results: $OUT/summary.txt and $OUT/results.tar.gz.
#   [SIZE=27b] [MODES="on off"] [RUNS="a b c"] [RUNS_OFF=...] [SERVE_ARGS="--max-num-batched-tokens 8192"]
#   bash .devbuild/prefix/prefix_cache_gpu.sh
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
DEADLINE=${DEADLINE:-570}
OUT=${OUT:-/tmp/prefix_out}
R=/tmp/prefix_results
BUNDLE=${BUNDLE:-$HERE/bundle.tar.xz}
MODES=${MODES:-on off}
RUNS=${RUNS:-a b c}
SIZE=${SIZE:-9b}
PORT=18080
. "$HERE/serve_gpu_common.sh"
note "bundle commit $(tr '\n' ' ' < "$B/COMMIT"); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"

CKPT=/tmp/qwen35-$SIZE-random
( PYTHONUNBUFFERED=1 python3 "$HERE/make_random_checkpoint.py" --size "$SIZE" --out "$CKPT" &&
  python3 "$HERE/make_checkpoint_tokenizer.py" --out "$CKPT" ) > "$R/ckpt.log" 2>&1 &
CKPT_PID=$!

# 1. Equalities on the GPU while the checkpoint is written (the tests find tests/data from
#    the source tree the binary was built in; run them from a copy of that layout).
if [ -x "$B/bin/test_engine_tiny" ]; then
  for be in cuda cuda-f32; do
    DELTASERVE_TEST_BACKEND=$be timeout 120 "$B/bin/test_engine_tiny" "[prefix]" > "$R/test_prefix_$be.txt" 2>&1
    note "test_engine_tiny [prefix] on $be: rc=$? $(grep -E 'All tests passed|test cases:' "$R/test_prefix_$be.txt" | head -1)"
  done
fi
wait $CKPT_PID; note "checkpoint rc=$? ($(tail -1 "$R/ckpt.log"))"

bench=("$B/bin/bench_serve" --base-url "http://127.0.0.1:$PORT" --no-progress --ignore-eos)
for mode in $MODES; do
  flag=--enable-prefix-caching; [ "$mode" = off ] && flag=--no-enable-prefix-caching
  t0=$SECONDS
  "$B/bin/serve" --model "$CKPT" --backend cuda --port $PORT --gpu-memory-utilization 0.9 --max-num-seqs 256 \
    $flag ${SERVE_ARGS:-} > "$R/serve_$mode.log" 2>&1 &
  SERVE_PID=$!
  until curl -sf -m 2 http://127.0.0.1:$PORT/health > /dev/null; do
    kill -0 $SERVE_PID 2>/dev/null || break
    [ "$(left)" -gt 30 ] || break
    sleep 1
  done
  note "serve prefix $mode up in $((SECONDS - t0)) s: $(grep -E 'prefix caching' "$R/serve_$mode.log" | head -1 | cut -c1-160)"
  "${bench[@]}" --dataset random --random-vocab-size 151643 --num-prompts 32 --max-concurrency 32 \
    --random-input-len 1024 --random-output-len 16 > "$R/warmup_$mode.txt" 2>&1
  runs=$RUNS; [ "$mode" = off ] && runs=${RUNS_OFF:-$RUNS}
  for run in $runs; do
    [ "$(left)" -gt 40 ] || { note "no time left for $run/$mode"; continue; }
    case $run in
      a) args=(--endpoint /v1/chat/completions --dataset multi-turn --num-prompts 32 --max-concurrency 32 --turns 8
               --system-prompt-len 1700 --random-input-len 270 --random-output-len 200 --temperature 0) ;;
      b) args=(--dataset shared-prefix --random-vocab-size 151643 --shared-prefix-groups 1 --shared-prefix-len 4000
               --shared-suffix-len 100 --num-prompts 64 --max-concurrency 64 --random-output-len 16) ;;
      c) args=(--dataset random --random-vocab-size 151643 --num-prompts 128 --max-concurrency 64
               --random-input-len 1024 --random-output-len 256) ;;
    esac
    timeout $(( $(left) - 20 )) "${bench[@]}" "${args[@]}" --seed 1 --label "$run prefix-$mode" \
      --result-json "$R/${run}_$mode.json" > "$R/${run}_$mode.txt" 2>&1
    note "run $run prefix-$mode rc=$? ($(left) s left)"
  done
  curl -s "http://127.0.0.1:$PORT/metrics" | grep -E '^(vllm:prefix_cache|deltaserve:prefix_cache|vllm:num_preemptions)' \
    > "$R/metrics_$mode.txt"
  note "metrics $mode: $(tr '\n' ' ' < "$R/metrics_$mode.txt")"
  kill $SERVE_PID 2>/dev/null; wait $SERVE_PID 2>/dev/null
done
python3 - "$R" <<'EOF' | tee -a "$summary"
import json, os, sys
r = sys.argv[1]
def load(n):
    p = os.path.join(r, n + ".json")
    return json.load(open(p)) if os.path.exists(p) else None
print("| run | mode | duration s | out tok/s | TTFT p50 ms | TTFT p90 ms | TPOT p50 ms | turn TTFT p50 (ms) |")
print("|---|---|---|---|---|---|---|---|")
for run in "abc":
    for mode in ("on", "off"):
        j = load(f"{run}_{mode}")
        if not j: continue
        turns = j.get("ttft_by_turn") or []
        tt = " ".join(f"{t.get('median_ttft_ms', 0):.0f}" for t in turns) if isinstance(turns, list) else ""
        print(f"| {run} | {mode} | {j.get('duration', 0):.1f} | {j.get('output_throughput', 0):.0f} | "
              f"{j.get('median_ttft_ms', 0):.0f} | {j.get('p90_ttft_ms', 0):.0f} | {j.get('median_tpot_ms', 0):.1f} | {tt} |")
EOF
echo "==== summary"; cat "$summary"
