#!/usr/bin/env bash
# Builds the paged-attention GPU tests and benchmark with nvcc alone (no CMake, no Debian
# packages): the fallback for a GPU machine where the carried binaries do not run. Needs
# Catch2's single header carried in .deps/catch2/catch.hpp.
#   scripts/attn/attn_device_build.sh OUTDIR
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-.devbuild/attn}
mkdir -p "$out/obj"
flags="-std=c++20 -O3 -DNDEBUG -I. -I.deps --expt-relaxed-constexpr -gencode=arch=compute_90a,code=sm_90a"
srcs="kernels/cuda/paged_attention.cpp kernels/cuda/decode_chooser.cpp kernels/cuda/decode_workspace.cpp
  kernels/cuda/decode_planner.cpp kernels/cuda/decode_merge.cu kernels/cuda/decode_portable.cu kernels/cuda/tma_pool_map.cpp
  kernels/cuda/decode_tc_bf16.cu kernels/cuda/decode_tc_f16.cu kernels/cuda/decode_tc_q8_0.cu kernels/cuda/decode_tc_q4_0.cu
  kernels/cuda/decode_trace.cu kernels/cuda/kv_write.cu kernels/cpu/paged_attention_ref.cpp
  tests/test_main.cpp tests/kernels_cuda/test_paged_decode_gpu.cpp tests/kernels_cuda/test_kv_write_gpu.cpp
  programs/bench_paged_attention/bench_paged_attention.cu"
for s in $srcs; do echo "$s"; done | xargs -P "$(nproc)" -I{} sh -c \
  'nvcc '"$flags"' -DDELTASERVE_TEST_DATA=\"tests/data\" -DDELTASERVE_SOURCE_DIR=\".\" -x $(case {} in *.cpp) echo c++;; *) echo cu;; esac) -c {} -o '"$out"'/obj/$(echo {} | tr / _).o'
lib=$(for s in $srcs; do case $s in kernels/cuda/*) echo "$out/obj/$(echo $s | tr / _).o";; esac; done)
nvcc -gencode=arch=compute_90a,code=sm_90a -o "$out/test_kernels_cuda_gpu" $lib "$out/obj/kernels_cpu_paged_attention_ref.cpp.o" \
  "$out/obj/tests_test_main.cpp.o" "$out/obj/tests_kernels_cuda_test_paged_decode_gpu.cpp.o" \
  "$out/obj/tests_kernels_cuda_test_kv_write_gpu.cpp.o" -lpthread
nvcc -gencode=arch=compute_90a,code=sm_90a -o "$out/bench_paged_attention" $lib "$out/obj/programs_bench_paged_attention_bench_paged_attention.cu.o"
echo "built $out"
