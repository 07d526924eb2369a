// ReplayDrafter: the controlled-acceptance drafter for tests and benchmarks (serve_bench's
// "replay" method; the engine takes it from its composition root). Random-weight checkpoints make every real drafter miss,
// so measuring what verification saves needs drafts that are right at a chosen rate: this one
// remembers the output of each completed request by its prompt, and a later request with the
// same prompt, while its output still equals the remembered one, gets the remembered
// continuation, each token spoiled (replaced by another) with probability 1 - acceptance.
// Greedy requests repeat exactly, so a benchmark runs its prompts once to warm the drafter
// and again to measure; a request whose output departs from the record gets no more drafts.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

#include "kernels/sampler.h"
#include "scheduler/drafter.h"

namespace ds::bench {

class ReplayDrafter final : public scheduler::Drafter {
 public:
  static constexpr size_t kMaxRecords = 4096;  // prompts remembered (the oldest go first)

  ReplayDrafter(int64_t vocab, double acceptance, uint64_t seed) : vocab_(vocab), acceptance_(acceptance), rng_(seed) {}
  void propose(scheduler::RequestId id, std::span<const int32_t> tokens, int64_t prompt_len, int32_t max_tokens,
               std::vector<int32_t>& out) override;
  void finished(scheduler::RequestId id, std::span<const int32_t> tokens, int64_t prompt_len,
                bool completed) override;

 private:
  using Record = std::shared_ptr<const std::vector<int32_t>>;  // prompt, then the output
  struct Active {
    Record record;         // null: none, or the output departed from it
    int64_t matched = 0;   // tokens of the request known to equal the record's
  };
  Record find(std::span<const int32_t> tokens, int64_t prompt_len) const;

  int64_t vocab_;
  double acceptance_;
  kernels::SamplerRng rng_;
  std::unordered_multimap<uint64_t, Record> records_;  // by prompt hash
  std::deque<std::pair<uint64_t, Record>> order_;       // oldest first
  std::unordered_map<scheduler::RequestId, Active> active_;
};

}  // namespace ds::bench
