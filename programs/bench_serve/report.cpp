#include "programs/bench_serve/report.h"

#include <cmath>
#include <ctime>

namespace ds::bench {

namespace {

const char* const kMetricNames[] = {"ttft", "tpot", "itl", "e2el"};

const Distribution& metric(const ServingMetrics& m, int i) {
  const Distribution* d[] = {&m.ttft, &m.tpot, &m.itl, &m.e2el};
  return *d[i];
}

std::string rate_text(double rate) {
  if (std::isinf(rate)) return "inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", rate);
  return buf;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

double mean_output_tokens(const RequestClassMetrics& c) {
  return c.completed ? static_cast<double>(c.output_tokens) / static_cast<double>(c.completed) : 0.0;
}

Json class_json(const RequestClassMetrics& c) {
  return {{"requests", c.requests},
          {"completed", c.completed},
          {"failed", c.failed},
          {"finished_by_length", c.finished_by_length},
          {"total_output_tokens", c.output_tokens},
          {"mean_output_tokens", mean_output_tokens(c)},
          {"mean_tpot_ms", c.tpot.mean},
          {"median_tpot_ms", c.tpot.median},
          {"p99_tpot_ms", c.tpot.p99},
          {"median_e2el_ms", c.e2el.median}};
}

}  // namespace

void print_report(std::FILE* out, const RunInfo& info, const ServingMetrics& m) {
  auto row = [&](const char* name, const std::string& value) { std::fprintf(out, "%-34s %16s\n", name, value.c_str()); };
  auto num = [](double v, int digits) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", digits, v);
    return std::string(buf);
  };
  std::fprintf(out, "================ Serving benchmark result ================\n");
  row("Model:", info.model);
  row("Endpoint:", info.endpoint);
  row("Dataset:", info.dataset);
  row("Max concurrency:", info.max_concurrency > 0 ? std::to_string(info.max_concurrency) : "unlimited");
  row("Request rate (req/s):", rate_text(info.request_rate));
  row("Successful requests:", std::to_string(m.completed));
  row("Failed requests:", std::to_string(m.failed));
  row("Benchmark duration (s):", num(m.duration, 2));
  row("Total input tokens:", std::to_string(m.total_input_tokens));
  row("Total generated tokens:", std::to_string(m.total_output_tokens));
  row("Request throughput (req/s):", num(m.request_throughput, 2));
  row("Input token throughput (tok/s):", num(m.input_throughput, 2));
  row("Output token throughput (tok/s):", num(m.output_throughput, 2));
  row("Total token throughput (tok/s):", num(m.total_token_throughput, 2));
  std::fprintf(out, "%-10s %10s %10s %10s %10s %10s\n", "(ms)", "mean", "p50", "p90", "p99", "samples");
  const char* const labels[] = {"TTFT", "TPOT", "ITL", "E2E"};
  for (int i = 0; i < 4; ++i) {
    const Distribution& d = metric(m, i);
    std::fprintf(out, "%-10s %10.2f %10.2f %10.2f %10.2f %10zu\n", labels[i], d.mean, d.p50, d.p90, d.p99, d.count);
  }
  if (m.structured.requests > 0) {
    std::fprintf(out, "Structured outputs: %zu constrained, %zu unconstrained requests\n", m.structured.requests,
                 m.unstructured.requests);
    std::fprintf(out, "%-14s %9s %7s %9s %11s %10s %10s %10s\n", "requests", "completed", "failed", "length",
                 "mean out tok", "TPOT mean", "TPOT p50", "TPOT p99");
    using Row = std::pair<const char*, const RequestClassMetrics&>;
    for (const auto& [name, c] : {Row{"constrained", m.structured}, Row{"unconstrained", m.unstructured}})
      std::fprintf(out, "%-14s %9zu %7zu %9zu %11.1f %10.2f %10.2f %10.2f\n", name, c.completed, c.failed,
                   c.finished_by_length, mean_output_tokens(c), c.tpot.mean, c.tpot.p50, c.tpot.p99);
  }
  if (!m.turns.empty()) {
    std::fprintf(out, "TTFT by turn (ms)\n%-6s %9s %7s %12s %10s %10s %10s %10s\n", "turn", "completed", "failed",
                 "input tok", "mean", "p50", "p90", "p99");
    for (const TurnMetrics& t : m.turns)
      std::fprintf(out, "%-6d %9zu %7zu %12.1f %10.2f %10.2f %10.2f %10.2f\n", t.turn, t.completed, t.failed,
                   t.mean_input_tokens, t.ttft.mean, t.ttft.p50, t.ttft.p90, t.ttft.p99);
  }
  if (!m.errors.empty()) {
    std::fprintf(out, "Failed requests by error:\n");
    for (const ErrorGroup& e : m.errors) std::fprintf(out, "  %6zu x %s\n", e.count, e.error.c_str());
  }
  std::fprintf(out, "==========================================================\n");
}

Json result_json(const RunInfo& info, const ServingMetrics& m, const std::vector<RequestResult>& results) {
  Json j = {
      {"date", utc_now()},
      {"backend", info.endpoint == "/v1/chat/completions" ? "openai-chat" : "openai"},
      {"label", info.label},
      {"model_id", info.model},
      {"base_url", info.base_url},
      {"endpoint", info.endpoint},
      {"dataset", info.dataset},
      {"num_prompts", info.sessions},
      {"num_requests", info.requests},
      {"request_rate", std::isinf(info.request_rate) ? Json("inf") : Json(info.request_rate)},
      {"burstiness", 1.0},
      {"max_concurrency", info.max_concurrency > 0 ? Json(info.max_concurrency) : Json(nullptr)},
      {"seed", info.seed},
      {"warmup", info.warmup},
      {"duration", m.duration},
      {"completed", m.completed},
      {"failed", m.failed},
      {"total_input_tokens", m.total_input_tokens},
      {"total_output_tokens", m.total_output_tokens},
      {"request_throughput", m.request_throughput},
      {"input_throughput", m.input_throughput},
      {"output_throughput", m.output_throughput},
      {"total_token_throughput", m.total_token_throughput},
  };
  for (int i = 0; i < 4; ++i) {
    const std::string n = kMetricNames[i];
    const Distribution& d = metric(m, i);
    j["mean_" + n + "_ms"] = d.mean;
    j["median_" + n + "_ms"] = d.median;
    j["std_" + n + "_ms"] = d.std;
    j["p50_" + n + "_ms"] = d.p50;
    j["p90_" + n + "_ms"] = d.p90;
    j["p99_" + n + "_ms"] = d.p99;
  }
  if (!m.turns.empty()) {
    Json turns = Json::array();
    for (const TurnMetrics& t : m.turns)
      turns.push_back({{"turn", t.turn},
                       {"completed", t.completed},
                       {"failed", t.failed},
                       {"mean_input_tokens", t.mean_input_tokens},
                       {"mean_ttft_ms", t.ttft.mean},
                       {"median_ttft_ms", t.ttft.median},
                       {"p90_ttft_ms", t.ttft.p90},
                       {"p99_ttft_ms", t.ttft.p99}});
    j["ttft_by_turn"] = turns;
  }
  j["structured_requests"] = m.structured.requests;
  j["unstructured_requests"] = m.unstructured.requests;
  j["structured"] = class_json(m.structured);
  j["unstructured"] = class_json(m.unstructured);
  Json counts = Json::array();
  for (const ErrorGroup& e : m.errors) counts.push_back({{"error", e.error}, {"count", e.count}});
  j["error_counts"] = counts;
  // Per request, in workload order; vLLM's lists hold failed requests too (zeros, error set).
  Json input_lens = Json::array(), output_lens = Json::array(), ttfts = Json::array(), itls = Json::array(),
       errors = Json::array(), structured = Json::array(), finish_reasons = Json::array(), starts = Json::array(),
       turns_of = Json::array();
  for (const RequestResult& r : results) {
    input_lens.push_back(r.prompt_tokens);
    output_lens.push_back(r.completion_tokens);
    ttfts.push_back(r.ttft);
    itls.push_back(r.itl);
    errors.push_back(r.error);
    structured.push_back(r.structured);
    finish_reasons.push_back(r.finish_reason);
    starts.push_back(r.start);
    turns_of.push_back(r.turn);
  }
  j["input_lens"] = input_lens;
  j["output_lens"] = output_lens;
  j["ttfts"] = ttfts;
  j["itls"] = itls;
  j["errors"] = errors;
  j["structured_flags"] = structured;
  j["finish_reasons"] = finish_reasons;
  // Beyond vLLM's lists: when each request was sent and its turn, to line a run up against
  // the server's per-step trace (--log-level debug).
  j["start_times"] = starts;
  j["turns"] = turns_of;
  return j;
}

}  // namespace ds::bench
