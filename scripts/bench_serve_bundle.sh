#!/usr/bin/env bash
# Builds (in build-cuda/) what scripts/bench_serve_gpu.sh runs on the GPU machine -- serve,
# bench_serve, bench_scheduler, bench_cuda_model -- and stages them, with the shared libraries
# that machine lacks (not libcuda or cuBLAS, which it has), and the scripts of the run, in
# DEST (default .devbuild/bench-serve, ignored by git): DEST/bundle.tar.xz plus the scripts.
# The device tool sends the lead's checkout, so a helper stages into that checkout's
# .devbuild and carries it:
#   DEST=/work/main/.devbuild/bench-serve scripts/bench_serve_bundle.sh
#   (then on the device: bash .devbuild/bench-serve/bench_serve_gpu.sh)
# TARGETS picks other binaries, e.g. for scripts/prefix_cache_gpu.sh:
#   TARGETS="serve bench_serve test_engine_tiny" DEST=.devbuild/prefix scripts/bench_serve_bundle.sh
# or for scripts/deltanet_gpu.sh (which also needs fla.tar.xz, packed below):
#   TARGETS="bench_deltanet bench_cuda_model test_cuda_backend_ops_gpu test_cuda_model_gpu" DEST=.devbuild/deltanet scripts/bench_serve_bundle.sh
# or for scripts/structured_serve_gpu.sh:
#   TARGETS="serve bench_serve bench_grammar" DEST=.devbuild/bench-structured scripts/bench_serve_bundle.sh
# or for scripts/fp8_fixture_gpu.sh (which also wants make_reference.py beside it):
#   TARGETS=refcheck DEST=.devbuild/fp8-fixture scripts/bench_serve_bundle.sh
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${DEST:-.devbuild/bench-serve}
targets=${TARGETS:-serve bench_serve bench_scheduler bench_cuda_model}
cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-cuda -j "${JOBS:-2}" --target $targets
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
for t in $targets; do cp "build-cuda/$t" "$stage/bin/"; done
for t in $targets; do ldd "build-cuda/$t"; done | awk '/=> \//{print $3}' | sort -u |
  { grep -Ev '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libgcc_s|libstdc\+\+|libcuda|libcublas|libcublasLt)\.so' || true; } |
  while read -r lib; do cp -L "$lib" "$stage/lib/"; done
{ git rev-parse HEAD; git status --porcelain | grep -q . && echo "+local changes"; } > "$stage/COMMIT" || true
mkdir -p "$DEST"
tar -C "$stage" -cf - . | xz -T2 -6 > "$DEST/bundle.tar.xz"
cp scripts/bench_serve_gpu.sh scripts/prefix_cache_gpu.sh scripts/structured_serve_gpu.sh scripts/spec_decode_gpu.sh scripts/long_prefill_gpu.sh \
   scripts/fp8_gpu.sh scripts/gpu_tests_gpu.sh scripts/big_model_gpu.sh scripts/cuda_graphs_gpu.sh scripts/cuda_graphs_focus_gpu.sh \
   scripts/serve_gpu_common.sh scripts/prefill_attention_gpu.sh scripts/prefill_attention_peer.py \
   scripts/deltanet_gpu.sh scripts/deltanet_peer.py scripts/prefill_small_gpu.sh \
   scripts/make_random_checkpoint.py scripts/fp8_layout.py scripts/make_fp8_fixture.py scripts/fp8_fixture_gpu.sh \
   scripts/make_yarn_fixture.py scripts/yarn_fixture_gpu.sh scripts/long_context_gpu.sh scripts/long_context_report.py \
   scripts/make_checkpoint_tokenizer.py scripts/bench_serve_report.py "$DEST/"
# flash-linear-attention's source (MIT, the peer of deltanet_peer.py; not installed on the GPU
# machine), packed beside the scripts when the shared peers folder has it.
FLA_SRC=${FLA_SRC:-$(pwd)/../shared/peers/fla}
if [ -d "$FLA_SRC/fla" ]; then
  tar -C "$FLA_SRC" --exclude=__pycache__ -cf - fla LICENSE | xz -T2 -6 > "$DEST/fla.tar.xz"
fi
ls -la "$DEST"
