#include "programs/bench_serve/load_generator.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <random>
#include <thread>

#include "programs/bench_serve/progress_line.h"

namespace ds::bench {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

std::vector<double> arrival_times(size_t n, double rate, uint64_t seed) {
  std::vector<double> t(n, 0.0);
  if (std::isinf(rate)) return t;
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ULL);
  std::exponential_distribution<double> gap(rate);
  for (size_t i = 1; i < n; ++i) t[i] = t[i - 1] + gap(rng);
  return t;
}

LoadRun run_load(const ServerAddress& address, const std::string& api_key, const RequestBody& body,
                 const std::vector<Session>& sessions, const LoadPlan& plan) {
  // Each session's results start at its offset in the flat result list.
  std::vector<size_t> offset(sessions.size() + 1, 0);
  for (size_t i = 0; i < sessions.size(); ++i) offset[i + 1] = offset[i] + sessions[i].turns.size();
  LoadRun run;
  run.results.resize(offset.back());
  const std::vector<double> arrivals = arrival_times(sessions.size(), plan.request_rate, plan.seed);

  size_t workers = sessions.size();
  if (plan.max_concurrency > 0) workers = std::min(workers, static_cast<size_t>(plan.max_concurrency));
  ProgressLine progress(plan.title, run.results.size(), plan.progress);
  std::atomic<size_t> next{0};
  std::once_flag first_error;
  const auto start = Clock::now();

  auto serve_session = [&](OpenAiClient& client, size_t i) {
    const Session& s = sessions[i];
    std::vector<std::string> replies;
    for (size_t t = 0; t < s.turns.size(); ++t) {
      RequestResult& r = run.results[offset[i] + t];
      const Turn& turn = s.turns[t];
      const Json input = s.conversation ? conversation_messages(s, replies, t) : turn.input;
      const std::string request =
          body.make(input, turn.max_tokens, turn.structured, plan.models.empty() ? std::string() : plan.models[i % plan.models.size()]);
      progress.started();
      const double sent = seconds_since(start);
      r = client.stream(body.route(), request, body.chat());
      r.start = sent;
      r.turn = static_cast<int>(t);
      r.structured = turn.structured;
      progress.finished(r.success);
      if (!r.success) {
        std::call_once(first_error, [&] { progress.note("first error: " + r.error); });
        for (size_t rest = t + 1; rest < s.turns.size(); ++rest) {
          RequestResult& skipped = run.results[offset[i] + rest];
          skipped.error = "not sent: turn " + std::to_string(t + 1) + " of its conversation failed";
          skipped.turn = static_cast<int>(rest);
          skipped.structured = s.turns[rest].structured;
          skipped.start = seconds_since(start);
          progress.skipped();
        }
        return;
      }
      replies.push_back(r.content);
    }
  };

  std::vector<std::thread> threads;
  threads.reserve(workers);
  for (size_t w = 0; w < workers; ++w) {
    threads.emplace_back([&] {
      OpenAiClient client(address, api_key, plan.request_timeout);
      for (size_t i = next++; i < sessions.size(); i = next++) {
        std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                                  std::chrono::duration<double>(arrivals[i])));
        serve_session(client, i);
      }
    });
  }
  for (auto& t : threads) t.join();
  run.duration = seconds_since(start);
  return run;
}

}  // namespace ds::bench
