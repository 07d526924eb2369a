// ServerMetrics: what GET /metrics reports, in the Prometheus text format (version 0.0.4).
//
// Names follow vLLM's (`vllm:` prefix) wherever vLLM has the same quantity, so existing
// Grafana dashboards work unchanged; what vLLM has no name for (block and state-slot counts)
// uses the `deltaserve:` prefix. Every sample carries model_name="<served name>" as vLLM's do.
//   gauges      vllm:num_requests_running, vllm:num_requests_waiting, vllm:kv_cache_usage_perc,
//               deltaserve:kv_cache_blocks_used / _total, deltaserve:state_slots_used / _total,
//               deltaserve:max_ctx_tokens, deltaserve:prefix_cache_blocks / _evictable_blocks /
//               _snapshots / _snapshot_capacity
//   counters    vllm:prompt_tokens_total, vllm:generation_tokens_total,
//               vllm:prefix_cache_queries_total, vllm:prefix_cache_hits_total (tokens),
//               deltaserve:engine_iterations_total, deltaserve:engine_{schedule,forward,sample}_seconds_total,
//               vllm:num_preemptions_total, vllm:request_success_total{finished_reason},
//               deltaserve:http_requests_total{code}
//   histograms  vllm:time_to_first_token_seconds, vllm:inter_token_latency_seconds,
//               vllm:e2e_request_latency_seconds, vllm:request_queue_time_seconds
// Gauges and token counters come from the engine's stats snapshot at scrape time. The
// per-request histograms (end-to-end, queue, time to first token) are fed by the engine's
// on_finish hook (observe_request), so every request counts, even one whose client left;
// inter-token gaps come from the token events the request handlers read.
// Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "scheduler/engine_stats.h"
#include "scheduler/request.h"

namespace ds::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double v);
  // Appends the _bucket, _sum and _count samples (labels: extra labels inside the braces).
  void render(std::string& out, std::string_view name, std::string_view labels) const;
  uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> buckets_;  // per bound, not cumulative
  double sum_ = 0;
  uint64_t count_ = 0;
};

class ServerMetrics {
 public:
  explicit ServerMetrics(std::string model_name);

  // End-to-end, queue time and (when it produced one) time to first token of an engine
  // request; wire it to EngineConfig::on_finish.
  void observe_request(const scheduler::RequestMetrics& m);
  void observe_ttft(double seconds);
  void observe_inter_token(double seconds);
  void observe_e2e(double seconds);
  void observe_queue(double seconds);
  void count_finished(std::string_view reason);
  void count_http(int status);

  // The whole exposition; stats is null while the model is loading.
  std::string render(const scheduler::EngineStats* stats) const;

  uint64_t http_count(int status) const;
  // Shown as deltaserve:instance_info{instance_id="..."} 1.
  void set_instance_id(std::string id);

 private:
  std::string model_name_;
  std::string instance_id_;
  mutable std::mutex mu_;
  Histogram ttft_, itl_, e2e_, queue_;
  std::map<std::string, uint64_t, std::less<>> finished_;
  std::map<int, uint64_t> http_;
};

}  // namespace ds::server
