// Copies consecutive column ranges of a fused projection's output into their own buffers
// (the CPU twin of the CUDA kernel; the CPU engine itself never fuses, see
// Backend::fused_projection_rows).
#include <cstring>

#include "kernels/cpu/ops.h"

namespace ds::kernels::cpu {

void split_columns(const Tensor& x, std::span<Tensor> parts) {
  const char* op = "split_columns";
  check_f32(x, op, "x");
  DS_CHECK(x.rank() == 2, op, "x must be [M, N], got " + x.shape().str());
  DS_CHECK(!parts.empty() && parts.size() <= static_cast<size_t>(Backend::kMaxSplitParts), op,
           "between 1 and " + std::to_string(Backend::kMaxSplitParts) + " parts, got " + std::to_string(parts.size()));
  const int64_t m = x.dim(0), n = x.dim(1);
  int64_t total = 0;
  for (const auto& p : parts) {
    check_f32(p, op, "part");
    DS_CHECK(p.rank() >= 1 && p.dim(0) == m, op, "each part must have " + std::to_string(m) + " rows, got " + p.shape().str());
    total += p.numel() / m;
  }
  DS_CHECK(total == n, op, "the parts hold " + std::to_string(total) + " columns, x has " + std::to_string(n));
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
