#include "model/qwen35/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace ds::qwen35 {

namespace {

// The rotary dim at which `rotations` full turns fit into `positions` (HF's find_correction_dim).
double correction_dim(double rotations, double dim, double base, double positions) {
  return dim * std::log(positions / (rotations * 2 * std::numbers::pi)) / (2 * std::log(base));
}

}  // namespace

kernels::RopeParams rope_params(const ModelConfig& c) {
  kernels::RopeParams p;
  p.rotary_dim = c.rotary_dim;
  p.theta = c.rope_theta;
  p.mrope_section = c.mrope_section;
  if (!c.yarn) return p;
  const ModelConfig::Yarn& y = *c.yarn;
  const int64_t dim = c.rotary_dim, half = dim / 2;
  const double orig = static_cast<double>(y.original_max_positions);
  double low = correction_dim(y.beta_fast, static_cast<double>(dim), c.rope_theta, orig);
  double high = correction_dim(y.beta_slow, static_cast<double>(dim), c.rope_theta, orig);
  if (y.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;
  // HF computes in float32 tensors with Python scalars: each operation rounded to f32.
  const float base = static_cast<float>(c.rope_theta), factor = static_cast<float>(y.factor);
  const float f_low = static_cast<float>(low), f_span = static_cast<float>(high - low);
  p.inv_freq.resize(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    const float e = static_cast<float>(2 * i) / static_cast<float>(dim);
    const float pos_freq = static_cast<float>(std::pow(static_cast<double>(base), static_cast<double>(e)));
    const float extrapolated = 1.0f / pos_freq;
    const float interpolated = 1.0f / (factor * pos_freq);
    const float ramp = std::clamp((static_cast<float>(i) - f_low) / f_span, 0.0f, 1.0f);
    const float keep = 1.0f - ramp;  // HF's inv_freq_extrapolation_factor
    const float a = interpolated * (1.0f - keep);
    const float b = extrapolated * keep;
    p.inv_freq[static_cast<size_t>(i)] = a + b;
  }
  p.attention_scaling = static_cast<float>(y.attention_factor);
  return p;
}

}  // namespace ds::qwen35
