// SimulatedDrafter: drafts for a simulated verdict (simulated_verdict.h), benchmarks only.
// Random-weight checkpoints make every real drafter miss, and the replay drafter loses its
// record wherever a verify step's numerics turn a near-tie the other way, so measuring what
// verification saves at a given acceptance rate needs the verdict itself to be set. This
// drafter proposes K tokens taken from the request's own prompt: ordinary text ids, never an
// end-of-sequence id the prompt did not have, so a kept draft does not end a request early.
#pragma once

#include <cstdint>

#include "kernels/sampler.h"
#include "scheduler/drafter.h"

namespace ds::bench {

class SimulatedDrafter final : public scheduler::Drafter {
 public:
  explicit SimulatedDrafter(uint64_t seed) : rng_(seed) {}
  void propose(scheduler::RequestId id, std::span<const int32_t> tokens, int64_t prompt_len, int32_t max_tokens,
               std::vector<int32_t>& out) override;

 private:
  kernels::SamplerRng rng_;
};

}  // namespace ds::bench
