#!/usr/bin/env bash
# Smoke tests with curl against a running server (start one with scripts/run.sh).
#   scripts/smoke.sh                                  http://127.0.0.1:8080
#   PORT=9000 scripts/smoke.sh                        http://127.0.0.1:9000 (as scripts/run.sh)
#   BASE_URL=http://host:9000 API_KEY=k scripts/smoke.sh
# Each check prints ok/FAIL and the command it ran; the exit code is the number of failures.
set -uo pipefail
base=${BASE_URL:-http://${HOST:-127.0.0.1}:${PORT:-8080}}
auth=()
[ -n "${API_KEY:-}" ] && auth=(-H "Authorization: Bearer $API_KEY")
fails=0

# check NAME EXPECTED_STATUS PATTERN curl-args...: the status must match and the body
# must contain PATTERN (a grep -E expression).
check() {
  local name=$1 want=$2 pattern=$3
  shift 3
  local out status body
  out=$(curl -sS -m 60 -w '\n%{http_code}' "${auth[@]}" "$@" 2>&1)
  status=${out##*$'\n'}
  body=${out%$'\n'*}
  if [ "$status" = "$want" ] && grep -Eq -- "$pattern" <<<"$body"; then
    echo "ok    $name"
  else
    echo "FAIL  $name: HTTP $status (want $want), body: ${body:0:300}"
    echo "      curl $*"
    fails=$((fails + 1))
  fi
}
json=(-H 'Content-Type: application/json')

check "health" 200 '"status":"ok"' "$base/health"
check "models" 200 '"object":"list"' "$base/v1/models"
model=$(curl -sS "${auth[@]}" "$base/v1/models" | grep -Eo '"id":"[^"]*"' | head -1 | cut -d'"' -f4)
echo "      model: ${model:-?}"
check "chat completion" 200 '"finish_reason":"(length|stop)"' "${json[@]}" "$base/v1/chat/completions" \
  -d "{\"model\":\"$model\",\"messages\":[{\"role\":\"user\",\"content\":\"Hello! Who are you?\"}],\"max_tokens\":16,\"temperature\":0}"
check "chat streaming with usage" 200 'data: \[DONE\]' -N "${json[@]}" "$base/v1/chat/completions" \
  -d "{\"model\":\"$model\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":8,\"stream\":true,\"stream_options\":{\"include_usage\":true}}"
check "completion, n=2, seeded" 200 '"index":1' "${json[@]}" "$base/v1/completions" \
  -d "{\"model\":\"$model\",\"prompt\":\"Once upon a time\",\"max_tokens\":8,\"n\":2,\"seed\":1}"
check "stop string" 200 '"finish_reason":"(stop|length)"' "${json[@]}" "$base/v1/completions" \
  -d "{\"model\":\"$model\",\"prompt\":\"a b c\",\"max_tokens\":16,\"stop\":[\" \"]}"
check "logprobs" 200 '"top_logprobs"' "${json[@]}" "$base/v1/chat/completions" \
  -d "{\"model\":\"$model\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":4,\"logprobs\":true,\"top_logprobs\":2}"
check "tokenize" 200 '"tokens":\[' "${json[@]}" "$base/tokenize" -d '{"prompt":"Hello world"}'
check "detokenize" 200 '"prompt":' "${json[@]}" "$base/detokenize" -d '{"tokens":[1,2,3]}'
check "400 names the bad field" 400 '"param":"temperature"' "${json[@]}" "$base/v1/chat/completions" \
  -d "{\"model\":\"$model\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"temperature\":-1}"
check "404 for an unknown model" 404 'model_not_found' "${json[@]}" "$base/v1/chat/completions" \
  -d '{"model":"no-such-model","messages":[{"role":"user","content":"Hi"}]}'
check "metrics" 200 'vllm:num_requests_running' "$base/metrics"

echo "smoke: $fails failure(s) against $base"
exit "$fails"
