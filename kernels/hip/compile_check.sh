#!/usr/bin/env bash
# Compile-only check of the HIP build: the paged-attention sources of kernels/cuda (the same
# list as kernels/hip/CMakeLists.txt) through hipcc for gfx90a (or $HIP_ARCH). The rest of
# the CUDA backend (cuBLAS GEMMs, warp-of-32 reductions) is CUDA-only: Debian ships no
# rocBLAS. Used by scripts/test.sh when hipcc is installed.
set -euo pipefail
cd "$(dirname "$0")/../.."
arch=${HIP_ARCH:-gfx90a}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export HCC_AMDGPU_TARGET="$arch"  # keeps hipcc from probing for a GPU
sources=$(sed -n '/foreach(src IN ITEMS/,/)/p' kernels/hip/CMakeLists.txt |
          sed -e 's/.*ITEMS//' -e 's/)//' | tr -s ' \n' ' ')
[ -n "${sources// /}" ] || { echo "compile_check: no source list in kernels/hip/CMakeLists.txt" >&2; exit 1; }
n=0
for name in $sources; do
  hipcc --offload-arch="$arch" -std=c++20 -O2 -I. -x hip -c "kernels/cuda/$name" -o "$out/$name.o"
  n=$((n + 1))
done
echo "hipcc ($arch): $n sources of kernels/cuda compiled ($sources)"
