// ServingMetrics: the summary of a run, as vllm bench serve computes it.
//
// Over the successful requests: TTFT and E2E latency per request; TPOT per request with more
// than one output token, (latency - ttft) / (output tokens - 1); ITL pooled over every gap of
// every request. Token totals and throughputs come from the usage chunks; throughputs are per
// second of the whole run (first arrival to last reply). Percentiles interpolate linearly
// between order statistics (numpy's default). Failed requests are counted, grouped by their
// error text in order of first appearance; none is dropped.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "programs/bench_serve/request_result.h"

namespace ds::bench {

// Milliseconds. All zero for an empty sample.
struct Distribution {
  size_t count = 0;
  double mean = 0, median = 0, std = 0, p50 = 0, p90 = 0, p99 = 0;
};

// The p-th percentile (0..100) of `v` with linear interpolation; 0 for an empty v.
double percentile(std::vector<double> v, double p);
// The distribution, in milliseconds, of samples given in seconds.
Distribution distribution_ms(const std::vector<double>& seconds);

struct ErrorGroup {
  std::string error;
  size_t count = 0;
};

// Multi-turn: one row per turn index.
struct TurnMetrics {
  int turn = 0;  // 1-based
  size_t completed = 0, failed = 0;
  double mean_input_tokens = 0;  // of the completed requests (the history grows with the turns)
  Distribution ttft;
};

// The constrained (--structured-fraction) or the unconstrained requests of a run. Constrained
// replies end when their grammar does, so the two classes differ in length: per-token time
// (TPOT) compares them, not latency.
struct RequestClassMetrics {
  size_t requests = 0, completed = 0, failed = 0;
  size_t finished_by_length = 0;  // completed with finish_reason "length" (max_tokens reached)
  int64_t output_tokens = 0;      // of the completed ones
  Distribution tpot, e2el;
};

struct ServingMetrics {
  size_t completed = 0, failed = 0;
  double duration = 0;  // seconds
  int64_t total_input_tokens = 0, total_output_tokens = 0;
  double request_throughput = 0, input_throughput = 0, output_throughput = 0, total_token_throughput = 0;
  Distribution ttft, tpot, itl, e2el;
  std::vector<ErrorGroup> errors;
  std::vector<TurnMetrics> turns;  // filled when per_turn
  RequestClassMetrics structured, unstructured;
};

ServingMetrics summarize(const std::vector<RequestResult>& results, double duration, bool per_turn);

}  // namespace ds::bench
