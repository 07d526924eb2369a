// Splits the gated attention's q_proj output. HF views it as [rows, Nq, 2D] and chunks the
// last axis: per head the first D values are the query, the next D the output gate.
#include <cstring>

#include "kernels/cpu/ops.h"

namespace ds::kernels::cpu {

void split_query_gate(const Tensor& qg, Tensor& q, Tensor& gate) {
  const int64_t m = qg.dim(0), heads = qg.dim(1), d = qg.dim(2) / 2;
  const Shape want{m, heads, d};
  const float* src = qg.data_as<const float>();
  float* qs = q.data_as<float>();
  float* gs = gate.data_as<float>();
  const size_t bytes = static_cast<size_t>(d) * sizeof(float);
  for (int64_t i = 0; i < m * heads; ++i) {
    std::memcpy(qs + i * d, src + i * 2 * d, bytes);
    std::memcpy(gs + i * d, src + i * 2 * d + d, bytes);
  }
}

}  // namespace ds::kernels::cpu
