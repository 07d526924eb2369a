// SimulatedDrafter: controlled acceptance on any weights, for benchmarks only
// (speculative_config.h, "simulate"). Random-weight checkpoints make every real drafter
// miss, and the replay drafter loses its record wherever a verify step's numerics turn a
// near-tie the other way, so measuring what verification saves at a given acceptance rate
// needs the verdict itself to be set: this drafter proposes K tokens taken from the
// request's own prompt and decides how many of them a step keeps (the i-th with probability
// acceptance^i), whatever the model samples. The kept tokens are written into the K/V and
// the state as any accepted draft is, and the token after them is the model's own sample,
// so a step costs exactly what a step at that acceptance costs -- but the output is not the
// model's. SGLang's SGLANG_SIMULATE_ACC_LEN measures the same way.
#pragma once

#include <cstdint>

#include "kernels/sampler.h"
#include "scheduler/drafter.h"

namespace ds::scheduler {

class SimulatedDrafter final : public Drafter {
 public:
  SimulatedDrafter(double acceptance, uint64_t seed) : acceptance_(acceptance), rng_(seed) {}
  void propose(RequestId id, std::span<const int32_t> tokens, int64_t prompt_len, int32_t max_tokens,
               std::vector<int32_t>& out) override;
  std::optional<int32_t> simulated_acceptance(int32_t num_draft) override;

 private:
  double acceptance_;
  kernels::SamplerRng rng_;
};

}  // namespace ds::scheduler
