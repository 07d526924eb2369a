#!/usr/bin/env bash
# Speculative decoding on the GPU machine, one command (docs/benchmarks.md, "Speculative
# decoding"), on a random-weight checkpoint (SIZE, default 9b):
#  1. bench_speculative: decode tokens/s through the engine at each batch, K and acceptance
#     rate with the "simulate" method (drafts kept at a set rate whatever the model samples:
#     random weights would accept nothing) against plain decoding, in one process.
#  2. serve_bench + bench_serve: plain, then `--speculative-config` simulate at ACCEPTANCE for
#     each K in KS (serve_bench: serve with the benchmarks' controlled acceptance), at each
#     concurrency (greedy, ignore_eos): output tokens/s, TPOT and the acceptance counters
#     from /metrics.
# The bundle is scripts/bench_serve_bundle.sh's (TARGETS="serve_bench bench_serve
# bench_speculative"), carried.
#   [SIZE=9b] [KS="3"] [ACCEPTANCE=0.8] [CONCURRENCIES="1 8"] [BATCHES=1,8,32] [DEADLINE=560]
#   [INPUT_LEN=512] [OUTPUT_LEN=256] [NUM_PROMPTS=max(4, 2 x concurrency)]
#   bash .devbuild/<dir>/spec_decode_gpu.sh
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
DEADLINE=${DEADLINE:-560}
OUT=${OUT:-/tmp/spec_out}
R=/tmp/spec_results
BUNDLE=${BUNDLE:-$HERE/bundle.tar.xz}
SIZE=${SIZE:-9b}
KS=${KS:-3}
ACCEPTANCE=${ACCEPTANCE:-0.8}
CONCURRENCIES=${CONCURRENCIES:-1 8}
BATCHES=${BATCHES:-1,8,32}
BENCH_KS=${BENCH_KS:-1,2,3,4}
BENCH_ACCEPTANCE=${BENCH_ACCEPTANCE:-0.5,0.7,0.8,0.9}
OUTPUT_LEN=${OUTPUT_LEN:-256}
INPUT_LEN=${INPUT_LEN:-512}
BENCH_OUTPUT_LEN=${BENCH_OUTPUT_LEN:-$OUTPUT_LEN}
PORT=18090
. "$HERE/serve_gpu_common.sh"
note "$(date -u); bundle commit $(tr '\n' ' ' < "$B/COMMIT"); $(nvidia-smi --query-gpu=name --format=csv,noheader)"
CKPT=/tmp/qwen35-$SIZE-random
t0=$SECONDS
if [ ! -f "$CKPT/config.json" ]; then
  ( PYTHONUNBUFFERED=1 timeout 300 python3 "$HERE/make_random_checkpoint.py" --size "$SIZE" --out "$CKPT" &&
    timeout 60 python3 "$HERE/make_checkpoint_tokenizer.py" --out "$CKPT" ) > "$R/ckpt.log" 2>&1 ||
    { note "checkpoint failed: $(tail -2 "$R/ckpt.log")"; exit 1; }
fi
note "checkpoint in $((SECONDS - t0)) s"

if [ -n "$BATCHES" ]; then
  timeout $(( $(left) - 30 )) "$B/bin/bench_speculative" --model "$CKPT" --backend cuda --batches "$BATCHES" \
    --ks "$BENCH_KS" --acceptance "$BENCH_ACCEPTANCE" --prompt-len 512 --output-len "$BENCH_OUTPUT_LEN" --repeat 1 \
    --kv-cache-memory 16GiB > "$R/bench_speculative.txt" 2>&1
  note "bench_speculative rc=$? ($(left) s left)"
  grep '^|' "$R/bench_speculative.txt" >> "$summary"
fi

serve_pass() {  # name, extra serve args...
  local name=$1; shift
  "$B/bin/serve_bench" --model "$CKPT" --backend cuda --port $PORT --gpu-memory-utilization 0.9 --max-num-seqs 64 \
    --no-enable-prefix-caching "$@" > "$R/serve_$name.log" 2>&1 &
  local pid=$!
  until curl -sf -m 2 http://127.0.0.1:$PORT/health > /dev/null; do
    kill -0 $pid 2>/dev/null || { note "serve $name exited: $(tail -3 "$R/serve_$name.log" | tr '\n' ' ')"; return 1; }
    sleep 1
  done
  for c in $CONCURRENCIES; do
    [ "$(left)" -gt 40 ] || { note "no time left for ${name}_c$c"; continue; }
    local n=${NUM_PROMPTS:-$((c < 4 ? 4 : 2 * c))} run=${name}_c$c
    curl -s -m 5 http://127.0.0.1:$PORT/metrics | grep -E '^vllm:spec_decode_num_(draft|accepted)_tokens_total' > "$R/$run.before"
    timeout $(( $(left) - 20 )) "$B/bin/bench_serve" --base-url http://127.0.0.1:$PORT --endpoint /v1/completions \
      --no-progress --dataset random --random-input-len "$INPUT_LEN" --random-output-len "$OUTPUT_LEN" --ignore-eos \
      --temperature 0 --num-prompts $n --max-concurrency $c --seed $c --result-json "$R/$run.json" > "$R/$run.txt" 2>&1
    note "$run n=$n rc=$? ($(left) s left)"
    curl -s -m 5 http://127.0.0.1:$PORT/metrics | grep -E '^vllm:spec_decode_num_(draft|accepted)_tokens_total' > "$R/$run.after"
  done
  kill $pid; wait $pid 2>/dev/null
}

if [ -n "$KS" ]; then
  serve_pass plain
  for k in $KS; do
    serve_pass k$k --speculative-config \
      "{\"method\": \"simulate\", \"num_speculative_tokens\": $k, \"acceptance_rate\": $ACCEPTANCE, \"seed\": 1}"
  done
fi

python3 - "$R" "$KS" "$CONCURRENCIES" "$ACCEPTANCE" <<'PY' | tee -a "$summary"
import json, os, sys
r, ks, cs, acc = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), sys.argv[4]
def load(n):
    p = os.path.join(r, n + ".json")
    return json.load(open(p)) if os.path.exists(p) else None
def counter(n, when, key):
    p = os.path.join(r, f"{n}.{when}")
    if not os.path.exists(p): return 0.0
    for line in open(p):
        if line.startswith("vllm:spec_decode_num_" + key):
            return float(line.split()[-1])
    return 0.0
if ks:
    print(f"\n| K | C | plain out tok/s | simulate {acc} out tok/s | ratio | plain TPOT p50 ms | spec TPOT p50 ms | accepted / drafted |")
    print("|---|---|---|---|---|---|---|---|")
for k in ks:
    for c in cs:
        p, s = load(f"plain_c{c}"), load(f"k{k}_c{c}")
        if not p or not s: print(f"| {k} | {c} | missing |"); continue
        n = f"k{k}_c{c}"
        d = counter(n, "after", "draft") - counter(n, "before", "draft")
        a = counter(n, "after", "accepted") - counter(n, "before", "accepted")
        print(f"| {k} | {c} | {p['output_throughput']:.0f} | {s['output_throughput']:.0f} | "
              f"{s['output_throughput'] / p['output_throughput']:.2f} | {p['median_tpot_ms']:.2f} | "
              f"{s['median_tpot_ms']:.2f} | {a:.0f} / {d:.0f} = {a / d if d else 0:.2f} |")
PY
