// Zero-centred RMSNorm (Qwen3_5RMSNorm): y = x * rsqrt(mean(x²) + eps) * (1 + w), per row of
// weight.numel() elements; used for the layer norms, the final norm and q_norm / k_norm.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/vec.h"

namespace ds::kernels::cpu {

void rms_norm(ThreadPool& pool, const Tensor& x, const Tensor& weight, float eps, Tensor& out) {
  const int64_t d = weight.numel();
  const int64_t rows = x.numel() / d;
  const float* xs = x.data_as<const float>();
  const float* w = weight.data_as<const float>();
  float* ys = out.data_as<float>();
  const int64_t grain = std::max<int64_t>(1, 16384 / d);
  pool.parallel_for(rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = xs + r * d;
      float* yr = ys + r * d;
      const float inv = 1.0f / std::sqrt(sum_squares(xr, d) / static_cast<float>(d) + eps);
      for (int64_t i = 0; i < d; ++i) yr[i] = (xr[i] * inv) * (1.0f + w[i]);
    }
  });
}

}  // namespace ds::kernels::cpu
