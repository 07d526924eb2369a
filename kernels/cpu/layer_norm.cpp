// The vision encoder's elementwise ops: LayerNorm with weight and bias (statistics in double:
// the reference should not add its own rounding to a mean over a thousand elements), the bias
// add after each GEMM, and GELU in its exact and tanh forms.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/ops.h"

namespace ds::kernels::cpu {

void layer_norm(ThreadPool& pool, const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& out) {
  const int64_t n = x.dim(0), d = x.dim(1);
  const float* xs = x.data_as<const float>();
  const float* w = weight.data_as<const float>();
  const float* b = bias.data_as<const float>();
  float* ys = out.data_as<float>();
  pool.parallel_for(n, std::max<int64_t>(1, 16384 / d), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = xs + r * d;
      double mean = 0, var = 0;
      for (int64_t i = 0; i < d; ++i) mean += xr[i];
      mean /= static_cast<double>(d);
      for (int64_t i = 0; i < d; ++i) var += (xr[i] - mean) * (xr[i] - mean);
      const double inv = 1.0 / std::sqrt(var / static_cast<double>(d) + eps);
      float* yr = ys + r * d;
      for (int64_t i = 0; i < d; ++i) yr[i] = static_cast<float>((xr[i] - mean) * inv) * w[i] + b[i];
    }
  });
}

void add_bias(ThreadPool& pool, Tensor& x, const Tensor& bias) {
  const int64_t n = x.dim(0), d = x.dim(1);
  float* xs = x.data_as<float>();
  const float* b = bias.data_as<const float>();
  pool.parallel_for(n, std::max<int64_t>(1, 65536 / d), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      for (int64_t i = 0; i < d; ++i) xs[r * d + i] += b[i];
  });
}

void gelu(ThreadPool& pool, const Tensor& x, const Tensor& bias, Backend::Gelu kind, Tensor& out) {
  const int64_t n = x.dim(0), d = x.dim(1);
  const float* xs = x.data_as<const float>();
  const float* b = bias.data_as<const float>();
  float* ys = out.data_as<float>();
  pool.parallel_for(n, std::max<int64_t>(1, 65536 / d), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = xs + r * d;
      float* yr = ys + r * d;
      if (kind == Backend::Gelu::erf) {
        for (int64_t i = 0; i < d; ++i) {
          const float v = xr[i] + b[i];
          yr[i] = 0.5f * v * (1.0f + std::erf(v * 0.70710678118654752f));
        }
      } else {
        constexpr float k = 0.79788456080286536f;  // sqrt(2 / pi)
        for (int64_t i = 0; i < d; ++i) {
          const float v = xr[i] + b[i];
          yr[i] = 0.5f * v * (1.0f + std::tanh(k * (v + 0.044715f * v * v * v)));
        }
      }
    }
  });
}

}  // namespace ds::kernels::cpu
