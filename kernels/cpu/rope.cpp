// Partial rotate-half RoPE, in place on [rows, heads, D]: dims [0, R) rotate in pairs
// (i, i + R/2), the rest pass through. The angles follow HF's float32 recipe so the result
// matches it to rounding: the f32 frequencies (rope_frequencies: theta's, or YaRN's),
// angle = f32(p * inv_freq) (one rounded product), then cos and sin of that f32 angle, each
// times the attention scaling in f32 (HF's cos * attention_scaling). With M-RoPE positions
// each frequency reads its axis's position (backend.h, RopeParams).
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/ops.h"

namespace ds::kernels::cpu {

void rope(ThreadPool& pool, Tensor& x, const BatchPlan& plan, const RopeParams& params) {
  const int64_t heads = x.dim(1), d = x.dim(2), r = params.rotary_dim;
  const int64_t half = r / 2;
  const std::vector<float> inv_freq = rope_frequencies(params);
  const float scale = params.attention_scaling;
  // Which position each frequency reads: 0 (t, or the text position), 1 (h) or 2 (w).
  std::vector<uint8_t> axis(static_cast<size_t>(half), 0);
  const bool mrope = plan.has_mrope();
  if (mrope)
    for (int64_t i = 0; i < half; ++i) {
      if (i % 3 == 1 && i < 3 * params.mrope_section[1]) axis[static_cast<size_t>(i)] = 1;
      if (i % 3 == 2 && i < 3 * params.mrope_section[2]) axis[static_cast<size_t>(i)] = 2;
    }
  float* xs = x.data_as<float>();
  const auto& pos = plan.rope_positions();
  const int64_t* mpos = mrope ? plan.mrope_positions().data() : nullptr;
  pool.parallel_for(plan.num_rows(), std::max<int64_t>(1, 65536 / (heads * d)),
                    [&](int64_t begin, int64_t end) {
    std::vector<float> c(static_cast<size_t>(half)), s(static_cast<size_t>(half));
    for (int64_t row = begin; row < end; ++row) {
      const float p = static_cast<float>(pos[static_cast<size_t>(row)]);
      for (int64_t i = 0; i < half; ++i) {
        const float pi = mrope ? static_cast<float>(mpos[3 * row + axis[static_cast<size_t>(i)]]) : p;
        const float angle = pi * inv_freq[static_cast<size_t>(i)];
        c[static_cast<size_t>(i)] = static_cast<float>(std::cos(static_cast<double>(angle))) * scale;
        s[static_cast<size_t>(i)] = static_cast<float>(std::sin(static_cast<double>(angle))) * scale;
      }
      for (int64_t h = 0; h < heads; ++h) {
        float* v = xs + (row * heads + h) * d;
        for (int64_t i = 0; i < half; ++i) {
          const float x1 = v[i], x2 = v[i + half];
          v[i] = x1 * c[static_cast<size_t>(i)] - x2 * s[static_cast<size_t>(i)];
          v[i + half] = x2 * c[static_cast<size_t>(i)] + x1 * s[static_cast<size_t>(i)];
        }
      }
    }
  });
}

}  // namespace ds::kernels::cpu
