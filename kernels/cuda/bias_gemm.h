// bf16 GEMMs with the linear layer's bias added in cuBLASLt's epilogue (CUBLASLT_EPILOGUE_BIAS),
// or the bias and then GELU's tanh form (CUBLASLT_EPILOGUE_GELU_BIAS): the vision encoder's
// projections and its MLP's first half, whose bias and activation would otherwise be separate
// passes over the output. Same operands as run_gemm's cuBLAS path (cuda_gemm.cpp).
//
// Internal to kernels/cuda. Not thread-safe (one per CudaContext).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

namespace ds::cuda {

class BiasGemm {
 public:
  // Queues on `stream`, with `workspace` (bytes) for cuBLASLt's split-K and similar.
  BiasGemm(cudaStream_t stream, void* workspace, size_t workspace_bytes);
  ~BiasGemm();
  BiasGemm(const BiasGemm&) = delete;
  BiasGemm& operator=(const BiasGemm&) = delete;

  // out [M, N] f32 row-major = x · wᵀ + bias, or out + x · wᵀ + bias when accumulate: w [N, K]
  // and x [M, K] bf16, bias [N] f32. Returns false, having queued nothing, when cuBLASLt has no
  // algorithm for the shape (the caller takes gemm then add_bias); throws on a failed call. A
  // shape's plan (descriptors and the heuristic's algorithm) is made on its first call and kept.
  bool matmul(const uint16_t* w, const uint16_t* x, const float* bias, int64_t M, int64_t N, int64_t K, float* out,
              bool accumulate);
  // out [M, N] = GELU(x · wᵀ + bias) with GELU's tanh approximation (cuBLASLt's GELU), out f32
  // or bf16 (out_bf16). Same refusals as matmul.
  bool matmul_gelu(const uint16_t* w, const uint16_t* x, const float* bias, int64_t M, int64_t N, int64_t K, void* out,
                   bool out_bf16);

 private:
  struct Plan;
  // M, N, K, GELU, bf16 out (beta and bias are call arguments).
  using Key = std::tuple<int64_t, int64_t, int64_t, bool, bool>;
  Plan* plan_for(const Key& key, const float* bias);
  bool run(const Key& key, const uint16_t* w, const uint16_t* x, const float* bias, void* out, float beta);

  cudaStream_t stream_;
  void* workspace_;
  size_t workspace_bytes_;
  cublasLtHandle_t lt_ = nullptr;
  std::map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace ds::cuda
