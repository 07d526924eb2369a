// The larger ops of the CUDA backend, each in its own file: GEMM through cuBLAS
// (cuda_gemm.cpp) and paged attention (cuda_attention.cpp: the decode kernel for the leading
// decode rows, the GEMM-based prefill path for chunks). CudaBackend (cuda_backend.cpp)
// checks shapes and dispatches here.
//
// Internal to kernels/cuda.
#pragma once

#include <map>
#include <memory>
#include <tuple>

#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cuda_plan.h"
#include "kernels/cuda/paged_attention.h"
#include "kernels/tensor.h"

namespace ds::cuda {

// out [M, N] (f32) = x [M, K] · w [N, K]ᵀ (+ out when accumulate). w bf16 with x bf16 (an f32
// x is converted first), or w f32 with x f32: fp32 accumulation either way.
// Whether one-row GEMMs take the weight-streaming kernels of gemv.cu (DELTASERVE_CUDA_GEMV=0
// sends them to cuBLAS, for comparisons).
bool gemv_enabled();
// Whether 2-8-row GEMMs take the tensor-core skinny kernel (skinny_gemm.cu);
// DELTASERVE_CUDA_SKINNY_GEMM=0 sends them to cuBLAS, for comparisons.
bool skinny_gemm_enabled();

void run_gemm(CudaContext& ctx, const kernels::Tensor& x, const kernels::Tensor& w, kernels::Tensor& out,
              bool accumulate);

// Paged causal attention for one layer over a CudaBatchPlan (bf16 pools).
class AttentionRunner {
 public:
  explicit AttentionRunner(CudaContext& ctx) : ctx_(ctx) {}
  void run(const kernels::Tensor& q, const kernels::Tensor& k_pool, const kernels::Tensor& v_pool,
           const CudaBatchPlan& plan, float scale, kernels::Tensor& out);

 private:
  void decode(const kernels::Tensor& q, const KvPoolView& pools, const CudaBatchPlan& plan, float scale,
              kernels::Tensor& out);
  void prefill(int32_t seq, const kernels::Tensor& q, const KvPoolView& pools, const CudaBatchPlan& plan, float scale,
               kernels::Tensor& out);

  CudaContext& ctx_;
  std::map<std::tuple<int32_t, int32_t, int32_t, int32_t>, DecodeDevice> devices_;  // (Nq, Nkv, D, block size)
  std::unique_ptr<DecodeWorkspace> ws_;
  uint64_t ws_generation_ = 0;  // plan generation whose decode plan ws_ holds
  bool ws_valid_ = false;
};

}  // namespace ds::cuda
