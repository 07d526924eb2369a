#!/usr/bin/env bash
# Speculative decoding on the GPU machine, one command (docs/benchmarks.md, "Speculative
# decoding"): the random-weight 9B, `serve --backend cuda --speculative-config` with the replay
# drafter at a set acceptance rate (its drafts are what an earlier request with the same prompt
# generated, each token spoiled with probability 1 - rate), and bench_serve at each
# concurrency twice with the same seed: the first pass finds nothing to replay (plain
# decoding through the same server), the second replays the first's tokens (greedy,
# ignore_eos: identical requests). Reports output tokens/s, TPOT and the acceptance counters.
# The bundle is scripts/bench_serve_bundle.sh's (TARGETS="serve bench_serve"), carried.
#   [KS="3"] [ACCEPTANCE=0.8] [CONCURRENCIES="1 8"] [DEADLINE=300] bash .devbuild/<dir>/spec_decode_gpu.sh
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
DEADLINE=${DEADLINE:-300}
OUT=${OUT:-/tmp/spec_out}
R=/tmp/spec_results
BUNDLE=${BUNDLE:-$HERE/bundle.tar.xz}
KS=${KS:-3}
ACCEPTANCE=${ACCEPTANCE:-0.8}
CONCURRENCIES=${CONCURRENCIES:-1 8}
PORT=18090
. "$HERE/serve_gpu_common.sh"
note "$(date -u); bundle commit $(tr '\n' ' ' < "$B/COMMIT"); $(nvidia-smi --query-gpu=name --format=csv,noheader)"
CKPT=/tmp/qwen35-9b-random
t0=$SECONDS
( PYTHONUNBUFFERED=1 timeout 150 python3 "$HERE/make_random_checkpoint.py" --size 9b --out "$CKPT" &&
  timeout 60 python3 "$HERE/make_checkpoint_tokenizer.py" --out "$CKPT" ) > "$R/ckpt.log" 2>&1 ||
  { note "checkpoint failed: $(tail -2 "$R/ckpt.log")"; exit 1; }
note "checkpoint in $((SECONDS - t0)) s"

for k in $KS; do
  spec="{\"method\": \"replay\", \"num_speculative_tokens\": $k, \"acceptance_rate\": $ACCEPTANCE, \"seed\": 1}"
  "$B/bin/serve" --model "$CKPT" --backend cuda --port $PORT --gpu-memory-utilization 0.9 --max-num-seqs 64 \
    --no-enable-prefix-caching --speculative-config "$spec" > "$R/serve_k$k.log" 2>&1 &
  pid=$!
  until curl -sf -m 2 http://127.0.0.1:$PORT/health > /dev/null; do
    kill -0 $pid 2>/dev/null || { note "serve exited: $(tail -3 "$R/serve_k$k.log" | tr '\n' ' ')"; exit 1; }
    sleep 1
  done
  for c in $CONCURRENCIES; do
    n=$((c < 4 ? 4 : 2 * c))
    for pass in plain replay; do
      [ "$(left)" -gt 30 ] || { note "no time left for k$k c$c $pass"; continue; }
      name=k${k}_c${c}_$pass
      curl -s -m 5 http://127.0.0.1:$PORT/metrics | grep -E '^vllm:spec_decode_num_(draft|accepted)_tokens_total' > "$R/$name.before"
      timeout $(( $(left) - 20 )) "$B/bin/bench_serve" --base-url http://127.0.0.1:$PORT --endpoint /v1/completions \
        --no-progress --dataset random --random-input-len 512 --random-output-len 256 --ignore-eos --temperature 0 \
        --num-prompts $n --max-concurrency $c --seed $c --result-json "$R/$name.json" > "$R/$name.txt" 2>&1
      rc=$?
      curl -s -m 5 http://127.0.0.1:$PORT/metrics | grep -E '^vllm:spec_decode_num_(draft|accepted)_tokens_total' > "$R/$name.after"
      note "$name n=$n rc=$rc ($(left) s left)"
    done
  done
  kill $pid; wait $pid 2>/dev/null
done

python3 - "$R" "$KS" "$CONCURRENCIES" <<'PY' | tee -a "$summary"
import json, os, sys
r, ks, cs = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
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
print("\n| K | C | plain out tok/s | replay out tok/s | ratio | plain TPOT p50 ms | replay TPOT p50 ms | drafted | accepted | acceptance |")
print("|---|---|---|---|---|---|---|---|---|---|")
for k in ks:
    for c in cs:
        p, s = load(f"k{k}_c{c}_plain"), load(f"k{k}_c{c}_replay")
        if not p or not s: print(f"| {k} | {c} | missing |"); continue
        n = f"k{k}_c{c}_replay"
        d = counter(n, "after", "draft") - counter(n, "before", "draft")
        a = counter(n, "after", "accepted") - counter(n, "before", "accepted")
        print(f"| {k} | {c} | {p['output_throughput']:.0f} | {s['output_throughput']:.0f} | "
              f"{s['output_throughput'] / p['output_throughput']:.2f} | {p['median_tpot_ms']:.2f} | "
              f"{s['median_tpot_ms']:.2f} | {d:.0f} | {a:.0f} | {a / d if d else 0:.2f} |")
PY
