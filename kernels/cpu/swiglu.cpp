// SwiGLU on the fused gate|up projection: out = silu(gate) * up.
#include <algorithm>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/vec.h"

namespace ds::kernels::cpu {

void swiglu(ThreadPool& pool, const Tensor& gate_up, Tensor& out) {
  const int64_t m = gate_up.dim(0), inter = gate_up.dim(1) / 2;
  const float* gu = gate_up.data_as<const float>();
  float* o = out.data_as<float>();
  pool.parallel_for(m, std::max<int64_t>(1, 32768 / std::max<int64_t>(inter, 1)),
                    [&](int64_t begin, int64_t end) {
                      for (int64_t r = begin; r < end; ++r) {
                        const float* g = gu + r * 2 * inter;
                        const float* u = g + inter;
                        float* y = o + r * inter;
                        for (int64_t i = 0; i < inter; ++i) y[i] = silu(g[i]) * u[i];
                      }
                    });
}

}  // namespace ds::kernels::cpu
