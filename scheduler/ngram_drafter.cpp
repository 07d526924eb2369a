#include "scheduler/ngram_drafter.h"

#include <algorithm>

namespace ds::scheduler {

void NgramDrafter::propose(RequestId, std::span<const int32_t> tokens, int64_t, int32_t max_tokens,
                           std::vector<int32_t>& out) {
  out.clear();
  const auto len = static_cast<int64_t>(tokens.size());
  if (max_tokens < 1) return;
  for (int64_t n = std::min<int64_t>(max_n_, len - 1); n >= min_n_; --n) {
    const std::span<const int32_t> suffix = tokens.subspan(static_cast<size_t>(len - n));
    // Occurrences starting at p < len - n, latest first (p + n < len: a token follows).
    for (int64_t p = len - n - 1; p >= 0; --p) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + p)) continue;
      // What followed, and past the end of the history the same period again: a match that
      // overlaps the suffix is a repetition, which the draft continues.
      const int64_t from = p + n, period = len - from;
      for (int64_t i = 0; i < max_tokens; ++i)
        out.push_back(i < period ? tokens[static_cast<size_t>(from + i)] : out[static_cast<size_t>(i - period)]);
      return;
    }
  }
}

}  // namespace ds::scheduler
