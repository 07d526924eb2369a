#include "programs/bench_serve/serving_metrics.h"

#include <algorithm>
#include <cmath>

namespace ds::bench {

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double rank = p / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (rank - static_cast<double>(lo));
}

Distribution distribution_ms(const std::vector<double>& seconds) {
  Distribution d;
  d.count = seconds.size();
  if (seconds.empty()) return d;
  std::vector<double> ms;
  ms.reserve(seconds.size());
  for (double s : seconds) ms.push_back(s * 1000.0);
  double sum = 0;
  for (double x : ms) sum += x;
  d.mean = sum / static_cast<double>(ms.size());
  double sq = 0;
  for (double x : ms) sq += (x - d.mean) * (x - d.mean);
  d.std = std::sqrt(sq / static_cast<double>(ms.size()));
  d.median = d.p50 = percentile(ms, 50);
  d.p90 = percentile(ms, 90);
  d.p99 = percentile(ms, 99);
  return d;
}

namespace {

// TPOT exists for replies of more than one token: the gaps after the first.
void add_tpot(std::vector<double>& tpot, const RequestResult& r) {
  if (r.completion_tokens > 1) tpot.push_back((r.latency - r.ttft) / static_cast<double>(r.completion_tokens - 1));
}

RequestClassMetrics class_metrics(const std::vector<RequestResult>& results, bool structured) {
  RequestClassMetrics c;
  std::vector<double> tpot, e2el;
  for (const RequestResult& r : results) {
    if (r.structured != structured) continue;
    ++c.requests;
    if (!r.success) {
      ++c.failed;
      continue;
    }
    ++c.completed;
    if (r.finish_reason == "length") ++c.finished_by_length;
    c.output_tokens += r.completion_tokens;
    e2el.push_back(r.latency);
    add_tpot(tpot, r);
  }
  c.tpot = distribution_ms(tpot);
  c.e2el = distribution_ms(e2el);
  return c;
}

}  // namespace

ServingMetrics summarize(const std::vector<RequestResult>& results, double duration, bool per_turn) {
  ServingMetrics m;
  m.duration = duration;
  std::vector<double> ttft, tpot, itl, e2el;
  for (const RequestResult& r : results) {
    if (!r.success) {
      ++m.failed;
      auto g = std::find_if(m.errors.begin(), m.errors.end(), [&](const ErrorGroup& e) { return e.error == r.error; });
      if (g == m.errors.end())
        m.errors.push_back(ErrorGroup{r.error, 1});
      else
        ++g->count;
      continue;
    }
    ++m.completed;
    m.total_input_tokens += r.prompt_tokens;
    m.total_output_tokens += r.completion_tokens;
    ttft.push_back(r.ttft);
    e2el.push_back(r.latency);
    add_tpot(tpot, r);
    itl.insert(itl.end(), r.itl.begin(), r.itl.end());
  }
  if (duration > 0) {
    m.request_throughput = static_cast<double>(m.completed) / duration;
    m.input_throughput = static_cast<double>(m.total_input_tokens) / duration;
    m.output_throughput = static_cast<double>(m.total_output_tokens) / duration;
    m.total_token_throughput = static_cast<double>(m.total_input_tokens + m.total_output_tokens) / duration;
  }
  m.ttft = distribution_ms(ttft);
  m.tpot = distribution_ms(tpot);
  m.itl = distribution_ms(itl);
  m.e2el = distribution_ms(e2el);
  m.structured = class_metrics(results, true);
  m.unstructured = class_metrics(results, false);
  if (!per_turn) return m;

  int turns = 0;
  for (const RequestResult& r : results) turns = std::max(turns, r.turn + 1);
  for (int t = 0; t < turns; ++t) {
    TurnMetrics tm;
    tm.turn = t + 1;
    std::vector<double> turn_ttft;
    double input = 0;
    for (const RequestResult& r : results) {
      if (r.turn != t) continue;
      if (!r.success) {
        ++tm.failed;
        continue;
      }
      ++tm.completed;
      turn_ttft.push_back(r.ttft);
      input += static_cast<double>(r.prompt_tokens);
    }
    if (tm.completed) tm.mean_input_tokens = input / static_cast<double>(tm.completed);
    tm.ttft = distribution_ms(turn_ttft);
    m.turns.push_back(tm);
  }
  return m;
}

}  // namespace ds::bench
