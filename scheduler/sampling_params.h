// A request's sampling parameters: what the sampler computes with (kernels::SamplerSettings:
// temperature, top-k/p, min-p, penalties, logit bias, logprobs) plus the seed of the request's
// own generator, and the validation whose message an HTTP 400 carries.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include "kernels/sampler.h"

namespace ds::scheduler {

struct SamplingParams : kernels::SamplerSettings {
  std::optional<uint64_t> seed;  // none = the engine picks a random one

  // Empty when the parameters are usable with a vocabulary of `vocab` tokens, otherwise a
  // message naming the field (what an HTTP 400 says).
  std::string validate(int64_t vocab) const {
    if (!std::isfinite(temperature) || temperature < 0) return "temperature must be >= 0";
    if (top_k < -1) return "top_k must be -1, 0 (off) or positive";
    if (!(top_p > 0 && top_p <= 1)) return "top_p must be in (0, 1]";
    if (!(min_p >= 0 && min_p <= 1)) return "min_p must be in [0, 1]";
    if (!(repetition_penalty > 0) || !std::isfinite(repetition_penalty)) return "repetition_penalty must be > 0";
    if (!(presence_penalty >= -2 && presence_penalty <= 2)) return "presence_penalty must be in [-2, 2]";
    if (!(frequency_penalty >= -2 && frequency_penalty <= 2)) return "frequency_penalty must be in [-2, 2]";
    if (top_logprobs < 0 || top_logprobs > kernels::kMaxTopLogprobs)
      return "top_logprobs must be in [0, " + std::to_string(kernels::kMaxTopLogprobs) + "]";
    for (const kernels::LogitBias& b : logit_bias) {
      if (b.token < 0 || b.token >= vocab)
        return "logit_bias token " + std::to_string(b.token) + " is outside the vocabulary of " +
               std::to_string(vocab);
      if (!std::isfinite(b.bias)) return "logit_bias values must be finite";
    }
    return {};
  }
};

}  // namespace ds::scheduler
