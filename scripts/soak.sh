#!/usr/bin/env bash
# Soak benchmark for serve on the CPU backend (not a CI test; results go to docs/bench-log,
# "## Server soak"): REQUESTS requests (default 2000) at CONCURRENCY (default 32) against a
# server it starts on the bundled tiny model, a mix of chat (plain and streaming), completions
# and n=2, with small max_tokens. It passes when
#   * every request got HTTP 200 and a finished reply (zero errors),
#   * the K/V blocks, state slots, running and waiting gauges in /metrics are back to 0,
#   * the server's resident memory is flat: sampled after every tenth of the run, it grows by
#     at most RSS_SLACK_MIB (default 8) from the first sample to the end. The CPU model keeps
#     a step workspace sized by the largest step it has seen (at most --max-num-batched-tokens
#     rows), so a warm-up request first fills one whole step; after that, growth would be a leak.
#   SERVE_BIN=build/serve scripts/soak.sh            (defaults shown)
#   REQUESTS=200 CONCURRENCY=8 scripts/soak.sh      a quick run
set -euo pipefail
cd "$(dirname "$0")/.."
serve=${SERVE_BIN:-build/serve}
requests=${REQUESTS:-2000}
concurrency=${CONCURRENCY:-32}
max_tokens=${MAX_TOKENS:-16}
slack_mib=${RSS_SLACK_MIB:-8}
work=$(mktemp -d)
pid=
trap 'if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; fi; rm -rf "$work"' EXIT

step_tokens=${STEP_TOKENS:-512}
"$serve" --port 0 --kv-cache-memory 256MiB --max-num-seqs "$concurrency" --max-queue 1024 \
  --max-num-batched-tokens "$step_tokens" >"$work/serve.log" 2>&1 &
pid=$!
for _ in $(seq 600); do grep -q "ready:" "$work/serve.log" && break; sleep 0.1; done
grep -q "ready:" "$work/serve.log" || { cat "$work/serve.log"; echo "soak: serve did not start"; exit 1; }
port=$(grep -Eo 'listening on http://[^ ]*:[0-9]+' "$work/serve.log" | grep -Eo '[0-9]+$')
base="http://127.0.0.1:$port"
rss_kib() { awk '/VmRSS/ {print $2}' "/proc/$pid/status"; }

# One request, chosen by its number; prints "<http status> <finished?>".
one() {
  local i=$1 body path stream=0
  case $((i % 4)) in
    0) path=/v1/chat/completions
       body="{\"messages\":[{\"role\":\"user\",\"content\":\"soak request $i\"}],\"max_tokens\":$max_tokens,\"seed\":$i}" ;;
    1) path=/v1/chat/completions stream=1
       body="{\"messages\":[{\"role\":\"user\",\"content\":\"stream $i\"}],\"max_tokens\":$max_tokens,\"stream\":true,\"stream_options\":{\"include_usage\":true}}" ;;
    2) path=/v1/completions
       body="{\"prompt\":\"completion number $i\",\"max_tokens\":$max_tokens,\"temperature\":0}" ;;
    3) path=/v1/completions
       body="{\"prompt\":\"two choices $i\",\"max_tokens\":$max_tokens,\"n\":2,\"seed\":$i}" ;;
  esac
  local out status
  out=$(curl -sS -m 300 -w '\n%{http_code}' -H 'Content-Type: application/json' "$base$path" -d "$body" 2>&1) || true
  status=${out##*$'\n'}
  local finished=0
  if [ "$stream" = 1 ]; then
    grep -q 'data: \[DONE\]' <<<"$out" && grep -q '"finish_reason":"' <<<"$out" && finished=1
  else
    grep -q '"finish_reason":"\(stop\|length\)"' <<<"$out" && finished=1
  fi
  echo "$status $finished"
}
export -f one
export base max_tokens

run_batch() {  # first last
  seq "$1" "$2" | xargs -P "$concurrency" -I{} bash -c 'one {}' >>"$work/results"
}

# Warm-up: one prompt longer than a step, so the step workspace reaches its largest size.
warm_prompt=$(seq $((step_tokens + 64)) | awk '{printf "%s5", (NR > 1 ? "," : "")}')
curl -sS -m 300 -o /dev/null -H 'Content-Type: application/json' "$base/v1/completions" \
  -d "{\"prompt\":[$warm_prompt],\"max_tokens\":1}"

start=$(date +%s.%N)
rss_series=()
done_n=0
for tenth in $(seq 10); do
  upto=$((requests * tenth / 10))
  run_batch $((done_n + 1)) "$upto"
  done_n=$upto
  rss_series+=("$(rss_kib)")
done
end=$(date +%s.%N)
sleep 0.5
rss_end=$(rss_kib)
metrics=$(curl -sS "$base/metrics")
gauge() { grep -E "^$1\{" <<<"$metrics" | awk '{print $2}'; }

total=$(wc -l <"$work/results")
ok=$(grep -c '^200 1$' "$work/results" || true)
errors=$((total - ok))
secs=$(awk "BEGIN {printf \"%.1f\", $end - $start}")
echo "soak: $total requests at concurrency $concurrency, max_tokens $max_tokens, step budget $step_tokens, in ${secs}s"
echo "soak: ok $ok, errors $errors ($(sort "$work/results" | uniq -c | tr '\n' ';'))"
echo "soak: gauges after: running $(gauge vllm:num_requests_running), waiting $(gauge vllm:num_requests_waiting)," \
     "blocks used $(gauge deltaserve:kv_cache_blocks_used)/$(gauge deltaserve:kv_cache_blocks_total)," \
     "slots used $(gauge deltaserve:state_slots_used)/$(gauge deltaserve:state_slots_total)"
echo "soak: generated tokens $(gauge vllm:generation_tokens_total), prompt tokens $(gauge vllm:prompt_tokens_total)," \
     "preemptions $(gauge vllm:num_preemptions_total)"
echo "soak: RSS (MiB) after each tenth: $(for r in "${rss_series[@]}"; do printf '%d ' $((r / 1024)); done)"
rss_first=${rss_series[0]}
echo "soak: RSS after the first tenth $((rss_first / 1024)) MiB, at the end $((rss_end / 1024)) MiB" \
     "(change $(((rss_end - rss_first) / 1024)) MiB, allowed $slack_mib)"
mean() { awk -v s="$(gauge "$1_sum")" -v c="$(gauge "$1_count")" 'BEGIN {printf "%.3f", (c > 0 ? s / c : 0)}'; }
echo "soak: $(awk -v n="$total" -v t="$secs" 'BEGIN {printf "%.1f", n / t}') requests/s," \
     "$(awk -v n="$(gauge vllm:generation_tokens_total)" -v t="$secs" 'BEGIN {printf "%.0f", n / t}') generated tokens/s;" \
     "mean per sequence: time to first token $(mean vllm:time_to_first_token_seconds) s," \
     "end-to-end $(mean vllm:e2e_request_latency_seconds) s, queue $(mean vllm:request_queue_time_seconds) s"

pass=1
[ "$errors" -eq 0 ] && [ "$total" -eq "$requests" ] || pass=0
for g in vllm:num_requests_running vllm:num_requests_waiting deltaserve:kv_cache_blocks_used deltaserve:state_slots_used; do
  [ "$(gauge "$g")" = "0" ] || pass=0
done
[ $(((rss_end - rss_first) / 1024)) -le "$slack_mib" ] || pass=0
kill -TERM "$pid"
wait "$pid" && echo "soak: serve exited 0 on SIGTERM" || { echo "soak: serve exit code $?"; pass=0; }
if [ "$pass" = 1 ]; then echo "soak: PASS"; exit 0; fi
echo "soak: FAIL"
exit 1
