// The attention output gate: x *= sigmoid(gate), elementwise, before o_proj.
#include <algorithm>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/vec.h"

namespace ds::kernels::cpu {

void sigmoid_gate(ThreadPool& pool, Tensor& x, const Tensor& gate) {
  float* xs = x.data_as<float>();
  const float* gs = gate.data_as<const float>();
  pool.parallel_for(x.numel(), 32768, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) xs[i] *= sigmoid(gs[i]);
  });
}

}  // namespace ds::kernels::cpu
