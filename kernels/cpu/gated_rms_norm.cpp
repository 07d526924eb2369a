// Gated RMSNorm of the DeltaNet output (Qwen3_5RMSNormGated, norm before gate): per head,
// y = (w * (x * rsqrt(mean(x²) + eps))) * silu(z), with a plain weight shared by all heads.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/vec.h"

namespace ds::kernels::cpu {

void gated_rms_norm(ThreadPool& pool, const Tensor& x, const Tensor& z, const Tensor& weight,
                    float eps, Tensor& out) {
  const int64_t d = weight.numel();
  const int64_t rows = x.numel() / d;
  const float* xs = x.data_as<const float>();
  const float* zs = z.data_as<const float>();
  const float* w = weight.data_as<const float>();
  float* ys = out.data_as<float>();
  const int64_t grain = std::max<int64_t>(1, 16384 / d);
  pool.parallel_for(rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = xs + r * d;
      const float* zr = zs + r * d;
      float* yr = ys + r * d;
      const float inv = 1.0f / std::sqrt(sum_squares(xr, d) / static_cast<float>(d) + eps);
      for (int64_t i = 0; i < d; ++i) yr[i] = (w[i] * (xr[i] * inv)) * silu(zr[i]);
    }
  });
}

}  // namespace ds::kernels::cpu
