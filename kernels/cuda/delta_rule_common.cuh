// What the gated delta rule's kernels share (delta_rule.cu: token by token and the fp32
// chunked path; delta_rule_tc.cu: the tensor-core chunked path): the head and chunk sizes
// and the per-token gates, computed in double as the CPU backend computes them.
#pragma once

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

__device__ __forceinline__ float q_scale() { return static_cast<float>(1.0 / sqrt(static_cast<double>(kD))); }

}  // namespace ds::cuda::ops::delta
