// FP8 x FP8 GEMMs with block scales on cuBLASLt (sm_90, CUDA >= 12.9): the prefill path for
// FP8 weights. The activations are quantised to e4m3 with one f32 scale per row and 128
// columns (quantize_rows_fp8, fp8_gemm.cu), the weight keeps the 128 x 128 block scales of
// Qwen's FP8 releases, and cuBLASLt's block-scaled GEMM runs at the FP8 tensor-core rate with
// fp32 accumulation, reading one byte per weight: no bf16 copy of the weight per call. This
// is the W8A8 scheme of DeepSeek-V3 and of vLLM's block-FP8 linear layers; the decode steps
// (up to KernelPaths::fp8_skinny_rows rows) keep bf16 activations (fp8_gemm.cu).
//
// Internal to kernels/cuda. Not thread-safe (one per CudaContext).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "kernels/dtype.h"

namespace ds::cuda {

// One FP8 operand of a block-scaled GEMM as cuBLASLt stores it: `rows` x k codes (k
// contiguous per row: a row-major [rows, k] matrix, cuBLAS's column-major k x rows), and
// f32 scales in `mode`'s layout (cuda_gemm.cpp says which layouts the library reads).
struct Fp8BlockOperand {
  const uint8_t* codes = nullptr;
  const float* scales = nullptr;
  cublasLtMatmulMatrixScale_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
};

class Fp8BlockGemm {
 public:
  // Queues on `stream`, with `workspace` (bytes) for cuBLASLt's split-K and similar.
  Fp8BlockGemm(cudaStream_t stream, void* workspace, size_t workspace_bytes);
  ~Fp8BlockGemm();
  Fp8BlockGemm(const Fp8BlockGemm&) = delete;
  Fp8BlockGemm& operator=(const Fp8BlockGemm&) = delete;

  // out [M, N] row-major (out_type f32 or bf16, rows ld_out elements apart) = x · wᵀ, or
  // out + x · wᵀ when accumulate: w [N, K] (A of cuBLAS, transposed), x [M, K] (B). K a
  // multiple of 16 (cuBLASLt's FP8 rule). Returns false, having queued nothing, when cuBLASLt
  // has no algorithm for the shape and modes (the caller takes another path); throws on a
  // failed call. available() is false where an earlier call found none (a shape is tried,
  // and its plan kept, on its first matmul).
  //
  // decode_tiles: steps of up to kDecodeTileRows rows run on the tile shape and split of K
  // that decode_tile() (fp8_block_gemm.cpp) picks for the shape, where cuBLASLt accepts it,
  // else on the heuristic's; false: always the heuristic's first offer (the benchmarks' A/B).
  bool available(cublasLtMatmulMatrixScale_t w_mode, cublasLtMatmulMatrixScale_t x_mode, int64_t M, int64_t N, int64_t K,
                 DType out_type, int64_t ld_out, bool decode_tiles = true);
  bool matmul(const Fp8BlockOperand& w, const Fp8BlockOperand& x, int64_t M, int64_t N, int64_t K, void* out,
              DType out_type, int64_t ld_out, bool accumulate, bool decode_tiles = true);

  // The rows up to which decode_tile() applies.
  static constexpr int64_t kDecodeTileRows = 64;

 private:
  struct Plan;
  // M, N, K, ld_out, the two scale modes, the output type, decode_tiles (beta is a call
  // argument: one plan serves accumulating and overwriting calls).
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int, int, int, bool>;
  Plan* plan_for(const Key& key, const float* w_scales, const float* x_scales);

  cudaStream_t stream_;
  void* workspace_;
  size_t workspace_bytes_;
  cublasLtHandle_t lt_ = nullptr;
  std::map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace ds::cuda
