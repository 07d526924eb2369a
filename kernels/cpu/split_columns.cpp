// Copies consecutive column ranges of a fused projection's output into their own buffers
// (the CPU twin of the CUDA kernel; the CPU engine itself never fuses, see
// Backend::fused_projection_rows).
#include <cstring>

#include "kernels/cpu/ops.h"

namespace ds::kernels::cpu {

void split_columns(const Tensor& x, std::span<Tensor> parts) {
  const int64_t m = x.dim(0), n = x.dim(1);
  int64_t total = 0;
  for (const auto& p : parts) {
    total += p.numel() / m;
  }
  const float* src = x.data_as<const float>();
  int64_t first = 0;
  for (auto& p : parts) {
    const int64_t w = p.numel() / m;
    float* dst = p.data_as<float>();
    for (int64_t r = 0; r < m; ++r)
      std::memcpy(dst + r * w, src + r * n + first, static_cast<size_t>(w) * sizeof(float));
    first += w;
  }
}

}  // namespace ds::kernels::cpu
