#!/usr/bin/env bash
# Compile-only check of the HIP build: every kernels/cuda source through hipcc for gfx90a
# (or $HIP_ARCH). Used by scripts/test.sh when hipcc is installed.
set -euo pipefail
cd "$(dirname "$0")/../.."
arch=${HIP_ARCH:-gfx90a}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export HCC_AMDGPU_TARGET="$arch"  # keeps hipcc from probing for a GPU
for src in kernels/cuda/*.cu; do
  hipcc --offload-arch="$arch" -std=c++20 -O2 -I. -x hip -c "$src" -o "$out/$(basename "$src").o"
done
echo "hipcc ($arch): $(ls "$out" | wc -l) sources of kernels/cuda compiled"
