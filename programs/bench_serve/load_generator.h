// run_load: sends a workload the way vllm bench serve does. Session i arrives at time t_i
// (all at 0 for --request-rate inf, else a Poisson process: exponential gaps of mean
// 1/rate); at most --max-concurrency sessions run at once, a session that arrives while all
// are busy starting when one frees. Each request's clock starts when it is sent, so queueing
// inside bench_serve never counts as server latency. The turns of a conversation run one
// after the other, each sending the replies received so far; when a turn fails, the later
// turns of that conversation are not sent and count as failed ("not sent: ...").
#pragma once

#include <string>
#include <vector>

#include "programs/bench_serve/openai_client.h"
#include "programs/bench_serve/request_body.h"
#include "programs/bench_serve/request_result.h"
#include "programs/bench_serve/workload.h"

namespace ds::bench {

struct LoadPlan {
  int max_concurrency = 0;      // 0: every session at once
  double request_rate = 0;      // sessions per second; infinity: no gaps
  uint64_t seed = 0;            // of the arrival times
  double request_timeout = 0;   // seconds
  bool progress = true;
  std::string title = "benchmark";
  // Models the sessions rotate through (session i: models[i % n]); empty: the body's.
  std::vector<std::string> models;
};

struct LoadRun {
  std::vector<RequestResult> results;  // session by session, turn by turn
  double duration = 0;                 // seconds from the first arrival to the last reply
};

LoadRun run_load(const ServerAddress& address, const std::string& api_key, const RequestBody& body,
                 const std::vector<Session>& sessions, const LoadPlan& plan);

// The arrival offsets in seconds of n sessions (0, then exponential gaps at `rate`).
std::vector<double> arrival_times(size_t n, double rate, uint64_t seed);

}  // namespace ds::bench
