#!/usr/bin/env bash
# Builds (in build-cuda/) the GPU tests of structured outputs on the CUDA backend -- the CUDA
# sampler against the CPU sampler (test_cuda_backend_ops_gpu, token masks included) and the
# tiny-model structured-generation suite (test_structured_generation) -- and stages them in
# DEST (default .devbuild/cuda-masks, ignored by git) with the shared libraries the GPU machine
# lacks, the fixtures that suite reads (tests/data/grammar, the JSON-Schema-Test-Suite drafts)
# and scripts/structured_cuda_run.sh. The device tool sends the lead's checkout, so a helper
# stages into that checkout's .devbuild and carries it:
#   DEST=/work/main/.devbuild/cuda-masks scripts/structured_cuda_bundle.sh
#   (then on the device, carry .devbuild/cuda-masks: bash .devbuild/cuda-masks/structured_cuda_run.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${DEST:-.devbuild/cuda-masks}
targets="test_cuda_backend_ops_gpu test_structured_generation"
cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DDELTASERVE_CUDA=ON >/dev/null
cmake --build build-cuda -j "${JOBS:-2}" --target $targets
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$stage/data" "$stage/json-schema-test-suite"
for t in $targets; do cp "build-cuda/$t" "$stage/bin/"; done
for t in $targets; do ldd "build-cuda/$t"; done | awk '/=> \//{print $3}' | sort -u |
  grep -Ev '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libgcc_s|libstdc\+\+|libcuda|libcublas|libcublasLt)\.so' |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
# The tiny checkpoint travels with the checkout; what the checkout may lack travels here.
cp -r tests/data/grammar "$stage/data/"
cp -r /usr/share/json-schema-test-suite/tests/draft4 /usr/share/json-schema-test-suite/tests/draft6 \
      /usr/share/json-schema-test-suite/tests/draft7 "$stage/json-schema-test-suite/"
{ git rev-parse HEAD; git status --porcelain -- kernels model scheduler tests | grep -q . && echo "+local changes"; } \
  > "$stage/COMMIT" || true
mkdir -p "$DEST"
tar -C "$stage" -cf - . | xz -T2 -6 > "$DEST/bundle.tar.xz"
cp scripts/structured_cuda_run.sh "$DEST/"
ls -la "$DEST"
