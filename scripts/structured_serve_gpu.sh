#!/usr/bin/env bash
# Structured outputs under load on the GPU machine (docs/benchmarks.md, "Structured outputs
# under load (9B, H200)"), in one command:
#   1. the random 9B checkpoint (make_random_checkpoint.py + make_checkpoint_tokenizer.py), and
#      while it is written bench_grammar on this machine's CPU (compile time and per-token
#      mask time for five schemas at the 248,320-token vocabulary);
#   2. serve --backend cuda on it, a warm-up (which also compiles the benchmark's schema into
#      the server's grammar cache), then bench_serve on /v1/chat/completions at each
#      concurrency of CONCURRENCIES, with --structured-fraction 0 and 0.5 (the default schema
#      of bench_serve: a small bounded record), ROUNDS times in A B B A order so that drift
#      cancels; /metrics engine counters read before and after every run.
# Server: --gpu-memory-utilization 0.9 --max-num-seqs 256 --no-enable-prefix-caching.
# Requests: chat, ~512 random words (about one token each), max_tokens 128, temperature 1,
# thinking off (so the constraint applies from the first token), no --ignore-eos: a grammar
# ends its reply when the value is complete, and a random-weight model almost never samples
# EOS, so unconstrained replies run to max_tokens. The two classes differ in length; compare
# per-token figures (TPOT, ITL, the unconstrained class's TPOT with and without constrained
# neighbours, mask seconds per engine step), with the output throughputs beside them.
# The binaries come from scripts/bench_serve_bundle.sh with TARGETS="serve bench_serve
# bench_grammar", staged in .devbuild/bench-structured (carry it). Results: $OUT/summary.txt
# (the table last) and $OUT/results.tar.gz.
#   [CONCURRENCIES="32 128"] [ROUNDS=2] [WAVES=4] [DEADLINE=400] [MODEL=DIR BACKEND=cpu] bash .devbuild/bench-structured/structured_serve_gpu.sh
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
DEADLINE=${DEADLINE:-400}
OUT=${OUT:-/tmp/structured_out}
R=/tmp/structured_results
BUNDLE=${BUNDLE:-$HERE/bundle.tar.xz}
CONCURRENCIES=${CONCURRENCIES:-32 128}
ROUNDS=${ROUNDS:-2}
WAVES=${WAVES:-4}  # requests per run = WAVES x concurrency
PORT=18080
. "$HERE/serve_gpu_common.sh"
{ date -u; echo "bundle commit $(tr '\n' ' ' < "$B/COMMIT")"; echo "cpus $(nproc)"; lscpu | grep -m1 'Model name';
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } > "$R/machine.txt" 2>&1
tee -a "$summary" < "$R/machine.txt"

# MODEL (a checkpoint directory) skips the random 9B; BACKEND=cpu with the tiny model tries the
# script on a workstation.
CKPT=${MODEL:-/tmp/qwen35-9b-random}
t0=$SECONDS
if [ -z "${MODEL:-}" ]; then
  ( PYTHONUNBUFFERED=1 timeout 150 python3 "$HERE/make_random_checkpoint.py" --size 9b --out "$CKPT" &&
    timeout 60 python3 "$HERE/make_checkpoint_tokenizer.py" --out "$CKPT" ) > "$R/ckpt.log" 2>&1 &
else
  echo "given: $CKPT" > "$R/ckpt.log"; true &
fi
CKPT_PID=$!

# 1. bench_grammar on the host CPU while the checkpoint is written (the bundled Qwen3
#    tokenizer of the source tree, extended to 248,320 tokens, as on the workstation).
TOK=/tmp/structured_tok
mkdir -p "$TOK"
if gzip -dc tests/data/qwen3-tokenizer-ref/tokenizer.json.gz > "$TOK/tokenizer.json" 2>/dev/null; then
  cp tests/data/qwen3-tokenizer-ref/tokenizer_config.json "$TOK/"
  timeout 90 "$B/bin/bench_grammar" --tokenizer "$TOK/tokenizer.json" --steps 3000 > "$R/bench_grammar.txt" 2>&1
  note "bench_grammar rc=$? in $((SECONDS - t0)) s ($(left) s left)"
else
  note "bench_grammar skipped: no tests/data/qwen3-tokenizer-ref in $(pwd)"
fi
wait $CKPT_PID; rc=$?
note "checkpoint rc=$rc in $((SECONDS - t0)) s: $(tail -1 "$R/ckpt.log")"
[ $rc = 0 ] || exit 1

t0=$SECONDS
BACKEND=${BACKEND:-cuda}
memory=(--gpu-memory-utilization 0.9); [ "$BACKEND" = cpu ] && memory=()
# No prefix caching: every run sends the same prompts (one --seed per concurrency, so the two
# fractions differ only in the constraint), and a later run must not find them cached.
"$B/bin/serve" --model "$CKPT" --backend "$BACKEND" --port $PORT "${memory[@]}" --max-num-seqs 256 \
  --no-enable-prefix-caching > "$R/serve.log" 2>&1 &
SERVE_PID=$!
stop_server() { kill $SERVE_PID 2>/dev/null; wait $SERVE_PID 2>/dev/null; }
trap 'stop_server; pack' EXIT
until curl -sf -m 2 http://127.0.0.1:$PORT/health > /dev/null; do
  kill -0 $SERVE_PID 2>/dev/null || { note "serve exited: $(tail -3 "$R/serve.log" | tr '\n' ' ')"; exit 1; }
  [ "$(left)" -gt 60 ] || { note "serve not up in time"; exit 1; }
  sleep 1
done
note "serve up in $((SECONDS - t0)) s ($(left) s left)"

# The engine counters of /metrics (cumulative): NAME VALUE lines.
counters() {
  curl -s -m 5 "http://127.0.0.1:$PORT/metrics" |
    grep -E '^deltaserve:engine_(iterations|forward_seconds|sample_seconds|schedule_seconds|grammar_mask_seconds|grammar_masks)_total' |
    sed -E 's/\{[^}]*\}//' > "$1"
}

# Until the server has no request left (a run cut by its timeout leaves some), at most 20 s.
wait_idle() {
  for _ in $(seq 40); do
    curl -s -m 2 "http://127.0.0.1:$PORT/metrics" | grep -E '^vllm:num_requests_(running|waiting)' |
      awk '{s += $NF} END {exit !(s == 0)}' && return
    sleep 0.5
  done
}

bench=("$B/bin/bench_serve" --base-url "http://127.0.0.1:$PORT" --endpoint /v1/chat/completions --no-progress
       --dataset random --random-input-len 512 --temperature 1
       --extra-body '{"chat_template_kwargs":{"enable_thinking":false}}')
# Warm-up: first steps pay one-time costs; the constrained half compiles the schema.
timeout 60 "${bench[@]}" --num-prompts 64 --max-concurrency 32 --random-output-len 32 --structured-fraction 0.5 \
  --seed 99 --result-json "$R/warmup.json" > "$R/warmup.txt" 2>&1
note "warm-up rc=$? ($(grep -E 'Successful|Failed requests:' "$R/warmup.txt" | tr -s ' ' | tr '\n' ' ')) ($(left) s left)"

for c in $CONCURRENCIES; do
  n=$((c * WAVES))
  order="0 0.5"
  for round in $(seq 1 "$ROUNDS"); do
    for f in $order; do
      name=c${c}_f${f}_r$round
      [ "$(left)" -gt 45 ] || { note "no time left for $name"; continue; }
      wait_idle
      counters "$R/$name.before"
      timeout $(( $(left) - 25 )) "${bench[@]}" --max-concurrency "$c" --num-prompts "$n" --seed "$c" \
        --random-output-len 128 --structured-fraction "$f" --label "c=$c structured=$f round $round" \
        --result-json "$R/$name.json" > "$R/$name.txt" 2>&1
      rc=$?
      counters "$R/$name.after"
      note "$name n=$n rc=$rc ($(left) s left)"
    done
    order=$(echo "$order" | tr ' ' '\n' | tac | tr '\n' ' ')  # A B, then B A
  done
done
stop_server

{ echo; echo "==== bench_grammar (host CPU: $(lscpu | grep -m1 'Model name' | sed 's/.*: *//'))"; cat "$R/bench_grammar.txt" 2>/dev/null; } >> "$summary"
python3 - "$R" "$CONCURRENCIES" "$ROUNDS" <<'EOF' | tee -a "$summary"
import json, os, sys
r, concs, rounds = sys.argv[1], sys.argv[2].split(), int(sys.argv[3])
def load(name):
    p = os.path.join(r, name + ".json")
    return json.load(open(p)) if os.path.exists(p) else None
def counters(name, when):
    p = os.path.join(r, f"{name}.{when}")
    out = {}
    if os.path.exists(p):
        for line in open(p):
            k, _, v = line.strip().rpartition(" ")
            try: out[k.split(":", 1)[1].replace("engine_", "").replace("_total", "")] = float(v)
            except ValueError: pass
    return out
def delta(name):
    a, b = counters(name, "before"), counters(name, "after")
    return {k: b[k] - a[k] for k in b if k in a}
rows, agg = [], {}
print("\n==== structured outputs under load (chat, ~512 in, max_tokens 128, temperature 1)")
print("| C | fraction | round | constrained / unconstrained | failed | out tok/s | req/s | TPOT p50 ms | ITL p50 ms | "
      "unconstrained / constrained TPOT p50 ms | constrained mean out tok (length-capped) | steps | ms/step | mask ms/step | us/mask |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for c in concs:
    for f in ("0", "0.5"):
        for rd in range(1, rounds + 1):
            name = f"c{c}_f{f}_r{rd}"
            j = load(name)
            if not j: continue
            d = delta(name)
            it = d.get("iterations", 0)
            mask_s, masks = d.get("grammar_mask_seconds", 0), d.get("grammar_masks", 0)
            s, u = j["structured"], j["unstructured"]
            print(f"| {c} | {f} | {rd} | {j['structured_requests']} / {j['unstructured_requests']} | {j['failed']} | "
                  f"{j['output_throughput']:.0f} | {j['request_throughput']:.2f} | {j['median_tpot_ms']:.2f} | "
                  f"{j['median_itl_ms']:.2f} | {u['median_tpot_ms']:.2f} / {s['median_tpot_ms']:.2f} | "
                  f"{s['mean_output_tokens']:.1f} ({s['finished_by_length']}) | {it:.0f} | "
                  f"{1000 * j['duration'] / it if it else 0:.2f} | {1000 * mask_s / it if it else 0:.3f} | "
                  f"{1e6 * mask_s / masks if masks else 0:.1f} |")
            a = agg.setdefault((c, f), {"tok": [], "tpot": [], "itl": [], "utpot": []})
            a["tok"].append(j["output_throughput"]); a["tpot"].append(j["median_tpot_ms"])
            a["itl"].append(j["median_itl_ms"]); a["utpot"].append(u["median_tpot_ms"])
mean = lambda v: sum(v) / len(v) if v else 0
print("\n| C | out tok/s 0.5 / 0 | TPOT p50 0.5 / 0 | ITL p50 0.5 / 0 | unconstrained TPOT p50 0.5 / 0 |")
print("|---|---|---|---|---|")
for c in concs:
    a, b = agg.get((c, "0.5")), agg.get((c, "0"))
    if not a or not b: continue
    ratio = lambda k: mean(a[k]) / mean(b[k]) if mean(b[k]) else 0
    print(f"| {c} | {ratio('tok'):.3f} | {ratio('tpot'):.3f} | {ratio('itl'):.3f} | {ratio('utpot'):.3f} |")
EOF
echo "==== summary"; cat "$summary"
