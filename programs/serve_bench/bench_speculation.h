// serve_bench's --speculative-config: serve's JSON form (server/speculative_option.h) plus the
// benchmarks' controlled acceptance, which serve does not offer:
//  * "replay": the benchmark drafter (programs/bench_drafters/replay_drafter.h): a request
//    whose prompt an earlier completed request had gets that output as drafts, each token
//    spoiled with probability 1 - acceptance_rate (greedy requests repeated from a warm-up
//    pass accept at about that rate on any weights);
//  * "simulate": prompt tokens as drafts and a simulated verdict: a step keeps the first i
//    drafts with probability acceptance_rate^i whatever the model samples
//    (simulated_verdict.h) -- the OUTPUT IS NOT THE MODEL'S;
//  * "mtp" with "acceptance_rate" below 1: the checkpoint's MTP module drafting for real, under
//    the same simulated verdict (its cost at a known acceptance) -- nor is this output.
// Keys: serve's, plus acceptance_rate (0..1, default 1) and seed (the drafters' generators).
#pragma once

#include <cstdint>
#include <string>

#include "scheduler/speculative_config.h"
#include "server/model_loader.h"

namespace ds::bench {

struct BenchSpeculation {
  scheduler::SpeculativeConfig config;  // what the engine is configured with (method: the drafter's name)
  double acceptance_rate = 1.0;
  uint64_t seed = 0;
  // Whether the steps' verdicts are simulated (the output is not the model's).
  bool simulated() const {
    return config.method == "simulate" || (config.method == "mtp" && acceptance_rate < 1);
  }
};

// Throws std::invalid_argument with a one-line message naming the flag.
BenchSpeculation parse_bench_speculation(const std::string& json);

// The engine's parts for it: the replay or prompt-token drafter handed to the engine, the
// simulated verdict around its model and sampler.
void compose_speculation(const BenchSpeculation& spec, server::EngineParts& parts);

}  // namespace ds::bench
