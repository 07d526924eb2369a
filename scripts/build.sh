#!/usr/bin/env bash
# Configures and builds deltaserve into build/ (Release). Extra arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${JOBS:-$(nproc)}
# CUDA is compiled whenever nvcc is present (said explicitly: scripts/run.sh may have turned it
# off in the same build folder).
cuda=OFF
command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ] && cuda=ON
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDELTASERVE_CUDA=$cuda "$@"
cmake --build build -j "$jobs"
