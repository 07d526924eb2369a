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

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cuda_plan.h"
#include "kernels/cuda/paged_attention.h"
#include "kernels/tensor.h"

namespace ds::cuda {

// out [M, N] (f32) = x [M, K] · w [N, K]ᵀ (+ out when accumulate). w bf16 with x bf16 (an f32
// x is converted first), or w f32 with x f32: fp32 accumulation either way. Decode-sized bf16
// steps take gemv.cu (one row) or skinny_gemm.cu (2-8 rows) where `paths` allows them.
void run_gemm(CudaContext& ctx, const CudaBackendOptions::KernelPaths& paths, const kernels::Tensor& x,
              const kernels::Tensor& w, kernels::Tensor& out, bool accumulate);

// Paged causal attention for one layer over a CudaBatchPlan (bf16 pools).
class AttentionRunner {
 public:
  AttentionRunner(CudaContext& ctx, const DecodeOptions& opts) : ctx_(ctx), opts_(opts) {}
  void run(const kernels::Tensor& q, const kernels::Tensor& k_pool, const kernels::Tensor& v_pool,
           const CudaBatchPlan& plan, float scale, kernels::Tensor& out);

 private:
  void decode(const kernels::Tensor& q, const KvPoolView& pools, const CudaBatchPlan& plan, float scale,
              kernels::Tensor& out);
  void prefill(int32_t seq, const kernels::Tensor& q, const KvPoolView& pools, const CudaBatchPlan& plan, float scale,
               kernels::Tensor& out);

  CudaContext& ctx_;
  DecodeOptions opts_;
  std::map<std::tuple<int32_t, int32_t, int32_t, int32_t>, DecodeDevice> devices_;  // (Nq, Nkv, D, block size)
  std::unique_ptr<DecodeWorkspace> ws_;
  uint64_t ws_generation_ = 0;  // plan generation whose decode plan ws_ holds
  bool ws_valid_ = false;
};

}  // namespace ds::cuda
