// SpeculativeConfig: how the engine drafts tokens for speculative decoding (engine.h), what
// `serve --speculative-config '{"method": ..., "num_speculative_tokens": K}'` sets.
//
// Methods (scheduler/drafter.h):
//  * "ngram": prompt lookup. The last n tokens (n from prompt_lookup_max down to
//    prompt_lookup_min) are looked for earlier in the prompt and output; the tokens that
//    followed their latest occurrence are the draft. No weights.
//  * "replay": the test-and-benchmark drafter with a controlled acceptance rate. It proposes
//    what an earlier request with the same prompt generated (so greedy requests repeated
//    from a warm-up pass get the model's own continuation), each token replaced by a wrong
//    one with probability 1 - acceptance_rate: the i-th draft of a step is accepted with
//    probability acceptance_rate^i whatever the weights are, as long as the model's output
//    repeats the earlier one (it does on the CPU; on a GPU a verify step can turn a
//    near-tie of random weights the other way, and the record is lost from there).
//  * "mtp": the checkpoint's multi-token-prediction module (scheduler/mtp_drafter.h,
//    model/qwen35/mtp.h) drafts from the target's hidden states: one module step per drafted
//    token. The model must have been loaded with it (qwen35::LoadOptions::mtp).
//    With acceptance_rate < 1 set as well (benchmarks only, like "simulate": the OUTPUT IS
//    NOT THE MODEL'S), the module runs as it would but each step keeps its drafts with
//    probability acceptance_rate^i whatever the model samples, so the module's cost is
//    counted at a known acceptance on random weights.
//  * "simulate": benchmarks only -- the OUTPUT IS NOT THE MODEL'S. Drafts are prompt tokens
//    and a step keeps the first i of them with probability acceptance_rate^i whatever the
//    model samples (simulated_drafter.h), so the cost of speculation at a known acceptance
//    can be measured on random weights.
#pragma once

#include <cstdint>
#include <string>

namespace ds::scheduler {

struct SpeculativeConfig {
  std::string method;                  // "" = off, "ngram", "replay", "simulate", "mtp"
  int32_t num_speculative_tokens = 0;  // K: drafted tokens verified per step (1..kMaxSpeculativeTokens)
  int32_t prompt_lookup_min = 1;       // ngram: shortest and longest suffix matched
  int32_t prompt_lookup_max = 4;
  double acceptance_rate = 1.0;        // replay, simulate (and mtp, below 1): chance each drafted token is right
  uint64_t seed = 0;                   // replay, simulate: their generator
  // No drafts while more than this many sequences run (0: always draft), vLLM's
  // disable_by_batch_size: large verify steps are GEMM-bound.
  int32_t disable_by_batch_size = 0;

  static constexpr int32_t kMaxSpeculativeTokens = 8;

  bool enabled() const { return !method.empty(); }
  // Whether the steps' verdicts are simulated (the output is not the model's): "simulate",
  // and "mtp" with an acceptance_rate below 1.
  bool simulated() const { return method == "simulate" || (method == "mtp" && acceptance_rate < 1); }
  // Empty when usable, otherwise a message naming the field.
  std::string validate() const {
    if (method.empty()) return {};
    if (method != "ngram" && method != "replay" && method != "simulate" && method != "mtp")
      return "speculative method must be \"ngram\", \"mtp\", \"replay\" or \"simulate\", not \"" + method + "\"";
    if (num_speculative_tokens < 1 || num_speculative_tokens > kMaxSpeculativeTokens)
      return "num_speculative_tokens must be in [1, " + std::to_string(kMaxSpeculativeTokens) + "]";
    if (prompt_lookup_min < 1 || prompt_lookup_max < prompt_lookup_min)
      return "prompt_lookup_min and prompt_lookup_max must satisfy 1 <= min <= max";
    if (!(acceptance_rate >= 0 && acceptance_rate <= 1)) return "acceptance_rate must be in [0, 1]";
    if (disable_by_batch_size < 0) return "disable_by_batch_size must be >= 0";
    return {};
  }
};

}  // namespace ds::scheduler
