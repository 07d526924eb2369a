#!/usr/bin/env bash
# Builds (in build-cuda/) the CUDA backend's GPU tests, refcheck, the engine acceptance tests,
# the whole-model benchmark and serve, and packs them with the shared libraries the GPU machine
# lacks (OpenBLAS, spdlog, fmt, ...; not libcuda or cuBLAS, which it has) into
# .devbuild/cuda/bundle.tar.xz (ignored by git), for scripts/cuda_device_run.sh to unpack
# there. xz keeps the bundle well under the device tool's carry limit.
set -euo pipefail
cd "$(dirname "$0")/.."
targets="test_kernels_cuda_gpu test_cuda_backend_ops_gpu test_cuda_model_gpu test_engine_tiny refcheck bench_cuda_model serve bench_paged_attention"
cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-cuda -j "${JOBS:-2}" --target $targets
stage=$(mktemp -d)
mkdir -p "$stage/bin" "$stage/lib"
for t in $targets; do cp "build-cuda/$t" "$stage/bin/"; done
# Baseline benchmark binaries for in-call A/Bs against an earlier commit (BENCH2_BIN in
# scripts/cuda_device_run.sh): .devbuild/base/bench_cuda_model_base and
# .devbuild/base/bench_paged_attention_base.
for b in bench_cuda_model_base bench_paged_attention_base; do
  if [ -x .devbuild/base/$b ]; then cp .devbuild/base/$b "$stage/bin/"; fi
done
# Every shared library the binaries load, minus the C runtime and the CUDA driver / cuBLAS.
for t in $targets; do ldd "build-cuda/$t"; done | awk '/=> \//{print $3}' | sort -u |
  grep -Ev '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libgcc_s|libstdc\+\+|libcuda|libcublas|libcublasLt)\.so' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
git rev-parse HEAD > "$stage/COMMIT"
git status --porcelain -- kernels model scheduler programs tests/kernels_cuda tests/model_cuda | grep -q . && echo "+local changes" >> "$stage/COMMIT"
mkdir -p .devbuild/cuda
tar -C "$stage" -cf - . | xz -T2 -6 > .devbuild/cuda/bundle.tar.xz
rm -rf "$stage"
ls -la .devbuild/cuda/bundle.tar.xz
