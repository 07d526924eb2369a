#!/usr/bin/env bash
# Configures and builds deltaserve into build/ (Release), tests included (the test command's
# build; scripts/run.sh builds serve alone). Extra arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${JOBS:-$(nproc)}
# CUDA is compiled whenever nvcc is present, and the tests always (both said explicitly:
# scripts/run.sh may have turned them off in the same build folder).
cuda=OFF
command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ] && cuda=ON
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDELTASERVE_CUDA=$cuda -DBUILD_TESTING=ON "$@"
cmake --build build -j "$jobs"
