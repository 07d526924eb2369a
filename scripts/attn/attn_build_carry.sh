#!/usr/bin/env bash
# Builds (in build-attn/) the paged-attention GPU tests and benchmark for carrying to the GPU
# machine, and copies them with Catch2's header (for the nvcc fallback) under .devbuild/ and
# .deps/ (both ignored by git).
set -euo pipefail
cd "$(dirname "$0")/../.."
cmake -S . -B build-attn -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-attn -j "${JOBS:-2}" --target test_kernels_cuda_gpu bench_paged_attention
mkdir -p .devbuild/attn .deps/catch2
cp build-attn/test_kernels_cuda_gpu build-attn/bench_paged_attention .devbuild/attn/
git rev-parse HEAD > .devbuild/attn/COMMIT
cp /usr/include/catch2/catch.hpp .deps/catch2/
du -sh .devbuild/attn .deps
