// Paged attention of the CUDA backend (cuda_attention.cpp): the leading decode rows through
// the paged decode kernel (paged_attention.h), every prefill chunk through the fused prefill
// kernel (attention_prefill.cu).
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

// Paged causal attention for one layer over a CudaBatchPlan; arguments satisfy the Backend
// contract (kernels/backend.cpp).
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
  std::map<std::tuple<int32_t, int32_t, int32_t, int32_t>, DecodeLaunchConfig> devices_;  // (Nq, Nkv, D, block size)
  std::unique_ptr<DecodeWorkspace> ws_;
  uint64_t ws_generation_ = 0;  // plan generation whose decode plan ws_ holds
  bool ws_valid_ = false;
  // Work lists of plans with a fixed decode length (CudaBatchPlan::decode_plan_len), planned
  // and uploaded once each and never rewritten: recorded steps read them at these addresses.
  // Key: (decode rows, decode_plan_len, Nq, Nkv, D, block size).
  std::map<std::tuple<int32_t, int32_t, int32_t, int32_t, int32_t, int32_t>, std::unique_ptr<DecodeWorkspace>> fixed_;
};

}  // namespace ds::cuda
