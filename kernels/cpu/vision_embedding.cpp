// The vision encoder's position inputs: the learned position table resampled per patch row
// (a weighted sum of the plan's taps, summed before it is added, as HF sums), and the 2-D
// rotary embedding from the plan's per-row cos / sin tables.
#include <algorithm>
#include <vector>

#include "kernels/cpu/ops.h"

namespace ds::kernels::cpu {

void add_position_embedding(ThreadPool& pool, const Tensor& table, const VisionPlan& plan, Tensor& x) {
  const int64_t rows = plan.num_rows(), d = x.dim(1), taps = plan.taps();
  const float* t = table.data_as<const float>();
  float* xs = x.data_as<float>();
  const int32_t* idx = plan.pos_index().data();
  const float* w = plan.pos_weight().data();
  pool.parallel_for(rows, std::max<int64_t>(1, 16384 / d), [&](int64_t begin, int64_t end) {
    std::vector<float> acc(static_cast<size_t>(d));
    for (int64_t r = begin; r < end; ++r) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t k = 0; k < taps; ++k) {
        const float* src = t + int64_t{idx[r * taps + k]} * d;
        const float wk = w[r * taps + k];
        for (int64_t i = 0; i < d; ++i) acc[static_cast<size_t>(i)] += src[i] * wk;
      }
      for (int64_t i = 0; i < d; ++i) xs[r * d + i] += acc[static_cast<size_t>(i)];
    }
  });
}

void rotary_embedding(ThreadPool& pool, Tensor& x, const VisionPlan& plan) {
  const int64_t rows = x.dim(0), heads = x.dim(1), d = x.dim(2), half = plan.rope_half();
  float* xs = x.data_as<float>();
  const float* cs = plan.rope_cos().data();
  const float* sn = plan.rope_sin().data();
  pool.parallel_for(rows, std::max<int64_t>(1, 16384 / (heads * d)), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* c = cs + r * half;
      const float* s = sn + r * half;
      for (int64_t h = 0; h < heads; ++h) {
        float* v = xs + (r * heads + h) * d;
        for (int64_t i = 0; i < half; ++i) {
          const float x1 = v[i], x2 = v[i + half];
          v[i] = x1 * c[i] - x2 * s[i];
          v[i + half] = x2 * c[i] + x1 * s[i];
        }
      }
    }
  });
}

}  // namespace ds::kernels::cpu
