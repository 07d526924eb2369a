// The rotary embedding of the full-attention layers as the kernels take it
// (kernels::RopeParams): the default RoPE's theta, or YaRN's frequencies and attention factor.
//
// YaRN (config.h's ModelConfig::Yarn) follows HF transformers' _compute_yarn_parameters over
// the rotary dims (R = head_dim x partial_rotary_factor), in its float32 arithmetic:
//   pos_freq_i   = theta^(2i / R)                         i < R/2
//   extrapolated = 1 / pos_freq_i,  interpolated = 1 / (factor x pos_freq_i)
//   low, high    = R ln(original / (beta x 2 pi)) / (2 ln theta) for beta_fast, beta_slow,
//                  floored / ceiled when truncate, clamped to [0, R - 1]
//   ramp_i       = clamp((i - low) / (high - low), 0, 1)   (high += 0.001 when equal)
//   inv_freq_i   = interpolated x ramp_i + extrapolated x (1 - ramp_i)
// so the fast dims (small i) keep their frequency, the slow ones are divided by factor, and
// cos and sin are multiplied by the attention factor. Interleaved M-RoPE (image prompts)
// picks each frequency's position axis by mrope_section over these same frequencies; with
// text positions it is this RoPE.
#pragma once

#include "kernels/backend.h"
#include "model/qwen35/config.h"

namespace ds::qwen35 {

kernels::RopeParams rope_params(const ModelConfig& config);

}  // namespace ds::qwen35
