// Steps 1-2 of sampling on the host: logit_bias, then the repetition, frequency and presence
// penalties (see kernels/sampler.h for the rules).
#include <algorithm>

#include "kernels/cpu/sampler.h"

namespace ds::kernels::cpu {

void apply_logit_bias(std::span<float> logits, const SamplerSettings& params) {
  const auto vocab = static_cast<int64_t>(logits.size());
  for (const LogitBias& b : params.logit_bias)
    if (b.token >= 0 && b.token < vocab) logits[static_cast<size_t>(b.token)] += b.bias;
}

void apply_penalties(std::span<float> logits, const SamplerSettings& params,
                     std::span<const int32_t> prompt, std::span<const int32_t> generated,
                     PenaltyScratch& scratch) {
  const auto vocab = static_cast<int64_t>(logits.size());
  auto in_vocab = [vocab](int32_t t) { return t >= 0 && t < vocab; };

  if (params.repetition_penalty != 1.0f) {
    // A stamp per token instead of a cleared bitmap: one O(vocab) fill per 2^32 calls.
    if (static_cast<int64_t>(scratch.stamp.size()) != vocab) {
      scratch.stamp.assign(static_cast<size_t>(vocab), 0);
      scratch.epoch = 0;
    }
    if (++scratch.epoch == 0) {
      std::fill(scratch.stamp.begin(), scratch.stamp.end(), 0u);
      scratch.epoch = 1;
    }
    const float p = params.repetition_penalty;
    auto penalise = [&](std::span<const int32_t> tokens) {
      for (int32_t t : tokens) {
        if (!in_vocab(t)) continue;
        uint32_t& s = scratch.stamp[static_cast<size_t>(t)];
        if (s == scratch.epoch) continue;
        s = scratch.epoch;
        float& x = logits[static_cast<size_t>(t)];
        x = x > 0 ? x / p : x * p;
      }
    };
    penalise(prompt);
    penalise(generated);
  }

  if (params.frequency_penalty != 0.0f || params.presence_penalty != 0.0f) {
    scratch.sorted.assign(generated.begin(), generated.end());
    std::sort(scratch.sorted.begin(), scratch.sorted.end());
    for (size_t i = 0; i < scratch.sorted.size();) {
      size_t j = i;
      while (j < scratch.sorted.size() && scratch.sorted[j] == scratch.sorted[i]) ++j;
      const int32_t t = scratch.sorted[i];
      if (in_vocab(t)) {
        const auto count = static_cast<float>(j - i);
        logits[static_cast<size_t>(t)] -= params.frequency_penalty * count + params.presence_penalty;
      }
      i = j;
    }
  }
}

}  // namespace ds::kernels::cpu
