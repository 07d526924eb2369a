// Drafter: proposes the tokens a speculative step verifies (speculative_config.h lists the
// methods). The engine thread asks it, before planning a step, for up to K tokens to follow
// each decoding sequence, and tells it when a request ends; verification (Scheduler::update)
// keeps the longest prefix of the draft that the target model's own sampling reproduces, so a
// drafter only affects speed, never output. The engine makes the drafter its config names
// (ngram, mtp), or takes one from its composition root (Engine's constructor: the
// benchmarks' controlled-acceptance drafters, programs/serve_bench).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "scheduler/request.h"
#include "scheduler/speculative_config.h"

namespace ds::scheduler {

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Fills `out` (cleared first) with at most max_tokens tokens likely to follow `tokens`
  // (request `id`'s prompt, its first prompt_len tokens, then what it generated).
  virtual void propose(RequestId id, std::span<const int32_t> tokens, int64_t prompt_len, int32_t max_tokens,
                       std::vector<int32_t>& out) = 0;
  // Request `id` ended with `tokens`; completed = it stopped or reached its length (not
  // cancelled or failed), so its output is the model's.
  virtual void finished(RequestId id, std::span<const int32_t> tokens, int64_t prompt_len, bool completed) {
    (void)id, (void)tokens, (void)prompt_len, (void)completed;
  }
};

// The drafter for a validated, enabled config that needs nothing but token history (ngram);
// the engine makes the MTP drafter itself (it runs the engine's model).
std::unique_ptr<Drafter> make_drafter(const SpeculativeConfig& config);

}  // namespace ds::scheduler
