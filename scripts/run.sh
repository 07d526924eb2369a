#!/usr/bin/env bash
# Newcomer command 1: install the Debian packages, build `serve` (Release, into build/) and
# start it on the bundled tiny model (tests/data/tiny-qwen35). Ctrl-C stops it.
#   scripts/run.sh                         http://127.0.0.1:8080
#   PORT=9000 scripts/run.sh --api-key k   extra arguments go to serve (see serve --help)
# Then, from another terminal: scripts/smoke.sh (curl checks) or any OpenAI client.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh run
jobs=${JOBS:-$(nproc)}
# The CUDA backend is built only where it can run (nvcc and a GPU); a CPU user starts without
# compiling it. CUDA=1 / CUDA=0 decide explicitly.
cuda=${CUDA:-}
if [ -z "$cuda" ]; then
  cuda=0
  { command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; } && nvidia-smi -L >/dev/null 2>&1 && cuda=1
fi
[ "$cuda" = 1 ] && cuda=ON || cuda=OFF
# Tests off: only the test command (scripts/test.sh) configures them and installs what they need.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDELTASERVE_CUDA=$cuda -DBUILD_TESTING=OFF >/dev/null
cmake --build build -j "$jobs" --target serve
host=${HOST:-127.0.0.1}
port=${PORT:-8080}
echo "deltaserve: starting on http://$host:$port (OpenAI base URL http://$host:$port/v1; Ctrl-C stops it)"
exec build/serve --host "$host" --port "$port" "$@"
