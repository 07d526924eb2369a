#include "programs/bench_drafters/simulated_drafter.h"

namespace ds::bench {

void SimulatedDrafter::propose(scheduler::RequestId, std::span<const int32_t> tokens, int64_t prompt_len,
                               int32_t max_tokens, std::vector<int32_t>& out) {
  out.clear();
  const auto n = static_cast<uint64_t>(prompt_len);
  for (int32_t i = 0; i < max_tokens && n > 0; ++i) out.push_back(tokens[static_cast<size_t>(rng_.next_u64() % n)]);
}

}  // namespace ds::bench
