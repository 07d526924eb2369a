// The results of a run: a table for people (print_report) and a JSON file for scripts
// (result_json), the latter with the keys of vllm bench serve's result file where it has
// them (completed, total_input_tokens, request_throughput, output_throughput,
// mean/median/std/pNN_{ttft,tpot,itl,e2el}_ms, input_lens, output_lens, ttfts, itls,
// errors), so a script that reads vLLM's results reads ours. Additions: failed,
// input_throughput, error_counts, ttft_by_turn for multi-turn runs, and for
// --structured-fraction: structured_requests / unstructured_requests (counts),
// structured / unstructured (each class's completions, finish_reason "length" count, output
// tokens, TPOT), and per request structured_flags and finish_reasons.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "programs/bench_serve/bench_json.h"
#include "programs/bench_serve/request_result.h"
#include "programs/bench_serve/serving_metrics.h"

namespace ds::bench {

// What was run, for both outputs.
struct RunInfo {
  std::string model, base_url, endpoint, dataset, label;
  size_t sessions = 0;  // prompts, or conversations for multi-turn
  size_t requests = 0;
  int max_concurrency = 0;
  double request_rate = 0;
  int warmup = 0;
  uint64_t seed = 0;
};

void print_report(std::FILE* out, const RunInfo& info, const ServingMetrics& m);

Json result_json(const RunInfo& info, const ServingMetrics& m, const std::vector<RequestResult>& results);

}  // namespace ds::bench
