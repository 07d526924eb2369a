// NgramDrafter: prompt lookup (speculative_config.h, "ngram"). For n from max_n down to
// min_n, the latest earlier occurrence of the last n tokens that has a token after it gives
// the draft: the tokens that followed it, continued periodically where they run into the end
// of the history (a loop the output is in). A scan back over the history per step (with
// early exit at the latest match); no state between steps.
#pragma once

#include "scheduler/drafter.h"

namespace ds::scheduler {

class NgramDrafter final : public Drafter {
 public:
  NgramDrafter(int32_t min_n, int32_t max_n) : min_n_(min_n), max_n_(max_n) {}
  void propose(RequestId id, std::span<const int32_t> tokens, int64_t prompt_len, int32_t max_tokens,
               std::vector<int32_t>& out) override;

 private:
  int32_t min_n_, max_n_;
};

}  // namespace ds::scheduler
