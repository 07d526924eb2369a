#include "scheduler/simulated_drafter.h"

namespace ds::scheduler {

void SimulatedDrafter::propose(RequestId, std::span<const int32_t> tokens, int64_t prompt_len, int32_t max_tokens,
                               std::vector<int32_t>& out) {
  out.clear();
  // Prompt tokens: ordinary text ids (never an end-of-sequence id the prompt did not have),
  // so a kept draft does not end the request early.
  const auto n = static_cast<uint64_t>(prompt_len);
  for (int32_t i = 0; i < max_tokens && n > 0; ++i) out.push_back(tokens[static_cast<size_t>(rng_.next_u64() % n)]);
}

std::optional<int32_t> SimulatedDrafter::simulated_acceptance(int32_t num_draft) {
  int32_t kept = 0;
  while (kept < num_draft && rng_.next_unit() < acceptance_) ++kept;
  return kept;
}

}  // namespace ds::scheduler
