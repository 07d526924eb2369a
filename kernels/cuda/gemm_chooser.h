// choose_gemm: the one place that decides which kernel runs a GEMM of the CUDA backend
// (cuda_gemm.cpp and cuda_gemm_int4.cpp run it), from the step's shape, the weight's element type and the
// backend's KernelPaths -- pure host code, unit-tested in CI (tests/kernels_cuda/
// test_gemm_chooser.cpp), after llama.cpp's ggml_cuda_get_best_fattn_kernel. Its decisions
// for the 9B and 27B projections are docs/gemm-choices.md, which that test generates.
//
// Internal to kernels/cuda.
#pragma once

#include <cstdint>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/dtype.h"
#include "kernels/tensor.h"

namespace ds::cuda {

enum class GemmKernel : uint8_t {
  cublas,            // cublasGemmEx: bf16 operands (f32 for an f32 weight), fp32 accumulation
  gemv_bf16,         // gemv.cu: the weight-streaming kernel, one row
  skinny_bf16,       // skinny_gemm.cu: tensor cores, 2 to kSkinnyMaxRows rows
  gemv_fp8,          // fp8_gemm.cu: the warp-per-row FP8 GEMV, one row
  skinny_fp8,        // fp8_gemm.cu: the FP8 tensor-core kernel, 1 to paths.fp8_skinny_rows rows
  fp8_block,         // cuBLASLt's block-scaled FP8 GEMM (fp8_block_gemm.h; the rows past the last
                     // multiple of 4 on skinny_fp8), or fp8_dequant_tiles where cuBLASLt has no
                     // algorithm for the shape (known at its first call)
  fp8_dequant_tiles,  // cuBLAS over bf16 tiles of the weight dequantised into scratch
  skinny_int4,        // int4_gemm.cu: the 4-bit codes read directly, 1 to paths.int4_skinny_rows rows
  int4_dequant_tiles  // cuBLAS over L2-sized bf16 tiles of the 4-bit weight dequantised into scratch
};

const char* gemm_kernel_name(GemmKernel k);

// out [M, N] (+)= x [M, K] · w [N, K]ᵀ, w of type `weight` (bf16, f32, fp8_e4m3 or int4; an
// FP8 weight with 128 x 128 block scales when block_scales).
struct GemmShape {
  int64_t M = 0, N = 0, K = 0;
  DType weight = DType::bf16;
  bool block_scales = true;
};

GemmKernel choose_gemm(const GemmShape& shape, const CudaBackendOptions::KernelPaths& paths);
// The shape of x [M, K] · w [N, K]ᵀ.
GemmShape gemm_shape(const kernels::Tensor& x, const kernels::Tensor& w);

// What cuBLASLt's block-scaled FP8 GEMM takes (CUDA 13.1 on the H200; `bench_fp8_gemm --probe`
// checks each against the host, docs/bench-log "FP8 prefill on block-scaled FP8 GEMMs"):
// K a multiple of 512 (then the weight's scales rows, padded to a multiple of 4, are the
// checkpoint's own layout; every projection of the real models) and M a multiple of 4 (the
// heuristic refuses other M).
inline constexpr int64_t kBlockGemmK = 512;
inline constexpr int64_t kBlockGemmRows = 4;

}  // namespace ds::cuda
