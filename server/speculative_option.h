// serve's --speculative-config: vLLM's JSON form of the speculative decoding settings,
// '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}', read into the
// engine's scheduler::SpeculativeConfig (speculative_config.h says what each method does).
// Keys: method ("ngram" or "mtp"), num_speculative_tokens, prompt_lookup_min and
// prompt_lookup_max (ngram), disable_by_batch_size. Unknown keys and values out of range are
// refused by name. "mtp" loads the checkpoint's MTP module (model_loader.h), and a checkpoint
// without one is refused at start-up. The benchmarks' controlled-acceptance forms (replay,
// simulate, acceptance_rate) belong to programs/serve_bench.
#pragma once

#include <string>

#include "scheduler/speculative_config.h"

namespace ds::server {

// Throws std::invalid_argument with a one-line message.
scheduler::SpeculativeConfig parse_speculative_config(const std::string& json);

}  // namespace ds::server
