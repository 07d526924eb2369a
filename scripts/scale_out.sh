#!/usr/bin/env bash
# N deltaserve replicas behind HAProxy, as one OpenAI-compatible endpoint (deploy/README.md).
#   scripts/scale_out.sh 2                         http://127.0.0.1:8080, CPU replicas on the bundled model
#   PORT=9000 scripts/scale_out.sh 4 --model DIR --backend cuda --gpu-memory-utilization 0.9
# Replicas listen on PORT+1 .. PORT+N (named replica-0 ..), HAProxy on PORT; arguments after N
# go to every replica. With --backend cuda and several GPUs, replica i gets GPU i mod #GPUs.
# Runs until SIGINT/SIGTERM, then drains the replicas (in-flight requests finish) and stops.
# Logs: the folder printed at start.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:?usage: scripts/scale_out.sh N [serve arguments...]}
shift
[ "$n" -ge 1 ] 2>/dev/null || { echo "N must be a positive number"; exit 2; }
host=${HOST:-127.0.0.1}
port=${PORT:-8080}
serve=${SERVE_BIN:-build/serve}
if [ ! -x "$serve" ]; then
  scripts/setup.sh run
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF >/dev/null
  cmake --build build -j "${JOBS:-$(nproc)}" --target serve
fi
if ! command -v haproxy >/dev/null 2>&1; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get install -y -qq haproxy
fi
gpus=0
case " $* " in *" --backend cuda "*) gpus=$(nvidia-smi -L 2>/dev/null | wc -l || echo 0) ;; esac

logs=$(mktemp -d -t deltaserve-scale-out.XXXXXX)
pids=()
servers=""
for ((i = 0; i < n; i++)); do
  rport=$((port + 1 + i))
  if [ "$gpus" -gt 1 ]; then export CUDA_VISIBLE_DEVICES=$((i % gpus)); fi
  "$serve" --host 127.0.0.1 --port "$rport" --instance-id "replica-$i" "$@" > "$logs/replica-$i.log" 2>&1 &
  pids+=($!)
  servers+="    server replica-$i 127.0.0.1:$rport"$'\n'
done
BIND="$host:$port" SERVERS="$servers" awk '
  $0 == "@SERVERS@" { printf "%s", ENVIRON["SERVERS"]; next }
  { gsub("@BIND@", ENVIRON["BIND"]); print }' deploy/haproxy.cfg.in > "$logs/haproxy.cfg"
haproxy -f "$logs/haproxy.cfg" -db > "$logs/haproxy.log" 2>&1 &
hpid=$!

stop() {
  echo "scale-out: draining ${#pids[@]} replicas"
  kill -TERM "${pids[@]}" 2>/dev/null || true
  wait "${pids[@]}" 2>/dev/null || true
  kill -TERM "$hpid" 2>/dev/null || true
  wait "$hpid" 2>/dev/null || true
  echo "scale-out: stopped"
  exit 0
}
trap stop INT TERM

for _ in $(seq 1 600); do
  up=0
  for ((i = 0; i < n; i++)); do
    curl -sf -m 1 "http://127.0.0.1:$((port + 1 + i))/health" >/dev/null && up=$((up + 1))
  done
  [ "$up" -eq "$n" ] && break
  for p in "${pids[@]}" "$hpid"; do kill -0 "$p" 2>/dev/null || { echo "a process exited; logs in $logs"; stop; }; done
  sleep 0.5
done
echo "deltaserve: $n replicas behind http://$host:$port (OpenAI base URL http://$host:$port/v1); logs in $logs"
echo "  conversation affinity: send X-Session-Id (or OpenAI's \"user\" field); Ctrl-C stops everything"
wait
