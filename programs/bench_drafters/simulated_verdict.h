// SimulatedVerdict: speculative decoding at a set acceptance on any weights, for benchmarks
// only -- the OUTPUT IS NOT THE MODEL'S. Random weights make every drafter miss, so what
// verification saves at a given acceptance can only be measured if the verdict itself is
// set (SGLang's SGLANG_SIMULATE_ACC_LEN measures the same way).
//
// It wraps the engine's model and sampler at a benchmark's composition root, leaving the
// engine as it is: after each target forward, every verify chunk (a chunk all of whose rows
// sample, more than one) keeps its first i drafts with probability acceptance^i whatever the
// model samples -- the samples of those rows are replaced by the drafts, so the engine's own
// verification accepts them -- and the row after them keeps the model's sample. The kept
// drafts are written into the K/V and the state as any accepted draft is, so a step costs
// what a step at that acceptance costs. Where the model's own sample also matches the next
// draft, verification keeps that one too, as it would anyway.
//
// With SimulatedDrafter (prompt tokens as drafts) this is serve_bench's "simulate" method;
// with the engine's MTP drafter, "mtp" at an acceptance below 1 (the module's real cost at a
// known acceptance).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/sampler.h"
#include "scheduler/forward_model.h"

namespace ds::bench {

// The engine's model and sampler with the verdict between them: hand both to the engine
// (the model outlives it).
struct SimulatedVerdict {
  std::unique_ptr<scheduler::ForwardModel> model;
  std::unique_ptr<kernels::Sampler> sampler;
};

// Wraps `model` (which must outlive the result) and the sampler the engine would use.
SimulatedVerdict simulated_verdict(scheduler::ForwardModel& model, std::unique_ptr<kernels::Sampler> sampler,
                                   double acceptance, uint64_t seed);
// The same, owning the model.
SimulatedVerdict simulated_verdict(std::unique_ptr<scheduler::ForwardModel> model,
                                   std::unique_ptr<kernels::Sampler> sampler, double acceptance, uint64_t seed);

}  // namespace ds::bench
