// What the gated delta rule's kernels share (delta_rule.cu: token by token and the fp32
// chunked path; delta_rule_tc.cu: the tensor-core chunked path): the head and chunk sizes
// the per-token gates, computed in double as the CPU backend computes them, and the
// recurrent state's element type in the slots.
#pragma once

#include <cuda_bf16.h>

#include <stdexcept>

#include "kernels/cuda/backend_ops.h"

namespace ds::cuda::ops::delta {

constexpr int kD = 128;             // dk = dv
constexpr int kC = kDeltaNetChunk;  // 64

struct Gates {
  float beta, g, decay;
};

__device__ __forceinline__ Gates gates(const DeltaNetArgs& a, int64_t row, int j) {
  const double bx = a.b[row * a.v_heads + j];
  const double ax = static_cast<double>(a.a[row * a.v_heads + j]) + static_cast<double>(a.dt_bias[j]);
  const double softplus = ax > 20.0 ? ax : log1p(exp(ax));
  const double g = -exp(static_cast<double>(a.a_log[j])) * softplus;
  Gates r;
  r.beta = static_cast<float>(1.0 / (1.0 + exp(-bx)));
  r.g = static_cast<float>(g);
  r.decay = static_cast<float>(exp(g));
  return r;
}

// The tensor-core chunked path (delta_rule_tc.cu), launched by deltanet_chunked.
void deltanet_chunked_tc(const DeltaNetArgs& a, const DeltaNetChunkItem* items, int32_t n_items,
                         const DeltaNetChunkSeq* chunk_seqs, int32_t n_chunk_seqs, float* scratch, int32_t n_sms,
                         Stream stream);

// The recurrent state in the slots is fp32 or bf16 (DeltaNetArgs::state_type); the kernels are
// instantiated for both and keep it in fp32 while they run, so a bf16 state is rounded once
// per store: where a step leaves it, and in the row-state and snapshot slots.
__device__ __forceinline__ float state_load(const float* p) { return *p; }
__device__ __forceinline__ float state_load(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ void state_store(float* p, float v) { *p = v; }
__device__ __forceinline__ void state_store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }
// Two adjacent elements (8- or 4-byte aligned).
__device__ __forceinline__ float2 state_load2(const float* p) { return *reinterpret_cast<const float2*>(p); }
__device__ __forceinline__ float2 state_load2(const __nv_bfloat16* p) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p));
}
__device__ __forceinline__ void state_store2(float* p, float lo, float hi) {
  *reinterpret_cast<float2*>(p) = make_float2(lo, hi);
}
__device__ __forceinline__ void state_store2(__nv_bfloat16* p, float lo, float hi) {
  *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(lo, hi);
}

// Calls f with a null pointer of the state's element type: the launchers' one dispatch.
template <class F>
void with_state_type(const DeltaNetArgs& a, F&& f) {
  if (a.state_type == DType::bf16) {
    f(static_cast<__nv_bfloat16*>(nullptr));
  } else if (a.state_type == DType::f32) {
    f(static_cast<float*>(nullptr));
  } else {
    throw std::invalid_argument("cuda backend: gated_delta_rule: the recurrent state must be f32 or bf16");
  }
}

__device__ __forceinline__ float q_scale() { return static_cast<float>(1.0 / sqrt(static_cast<double>(kD))); }

}  // namespace ds::cuda::ops::delta
