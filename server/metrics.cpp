#include "server/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <span>
#include <string>
#include <utility>

namespace ds::server {

namespace {

std::string number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  // The shortest text that reads back as the same double (le="0.005", not 0.005000000001).
  char buf[64];
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

void header(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

void sample(std::string& out, std::string_view name, std::string_view labels, double v) {
  out += name;
  out += '{';
  out += labels;
  out += "} ";
  out += number(v);
  out += '\n';
}

// Label values are quoted; backslash, quote and newline are escaped.
std::string quote(std::string_view s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '\\' || c == '"') q += '\\';
    if (c == '\n') {
      q += "\\n";
      continue;
    }
    q += c;
  }
  return q + '"';
}

// A histogram's samples: _bucket (cumulative, one per upper bound, then +Inf), _sum and
// _count. bucket(i): the observations in bucket i alone. labels: extra labels inside the braces.
template <class Bucket>
void histogram_samples(std::string& out, std::string_view name, std::string_view labels,
                       std::span<const double> bounds, Bucket bucket, uint64_t count, double sum) {
  const std::string name_bucket = std::string(name) + "_bucket";
  std::string prefix(labels);
  if (!prefix.empty()) prefix += ',';
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds.size(); ++i) {
    cumulative += static_cast<uint64_t>(bucket(i));
    sample(out, name_bucket, prefix + "le=\"" + number(bounds[i]) + "\"", static_cast<double>(cumulative));
  }
  sample(out, name_bucket, prefix + "le=\"+Inf\"", static_cast<double>(count));
  sample(out, std::string(name) + "_sum", labels, sum);
  sample(out, std::string(name) + "_count", labels, static_cast<double>(count));
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), buckets_(bounds_.size(), 0) {}

void Histogram::observe(double v) {
  if (!std::isfinite(v)) return;
  const auto it = std::lower_bound(bounds_.begin(), bounds_.end(), v);
  if (it != bounds_.end()) ++buckets_[static_cast<size_t>(it - bounds_.begin())];
  sum_ += v;
  ++count_;
}

void Histogram::render(std::string& out, std::string_view name, std::string_view labels) const {
  histogram_samples(out, name, labels, bounds_, [&](size_t i) { return buckets_[i]; }, count_, sum_);
}

namespace {

// The prefix cache's host tier (kvcache/host_cache.h): hits per tier, what the host holds,
// bytes each way, and the load latency histogram.
void render_host_tier(std::string& out, const std::string& m, const scheduler::EngineStats& s) {
  header(out, "deltaserve:prefix_cache_hit_tokens_total", "counter",
         "Prompt tokens whose K/V a prefix-cache hit took from each tier (device: shared; host: loaded back).");
  sample(out, "deltaserve:prefix_cache_hit_tokens_total", m + ",tier=\"device\"",
         static_cast<double>(s.prefix_cache_hits_total - s.host_cache_hit_tokens_total));
  sample(out, "deltaserve:prefix_cache_hit_tokens_total", m + ",tier=\"host\"",
         static_cast<double>(s.host_cache_hit_tokens_total));
  header(out, "deltaserve:prefix_cache_host_hits_total", "counter",
         "Admissions that loaded K/V blocks or a DeltaNet state snapshot from the host tier.");
  sample(out, "deltaserve:prefix_cache_host_hits_total", m, static_cast<double>(s.host_cache_hits_total));
  const std::pair<const char*, int32_t> gauges[] = {
      {"deltaserve:prefix_cache_host_blocks", s.host_cache_blocks},
      {"deltaserve:prefix_cache_host_block_capacity", s.host_cache_block_capacity},
      {"deltaserve:prefix_cache_host_snapshots", s.host_cache_snapshots},
      {"deltaserve:prefix_cache_host_snapshot_capacity", s.host_cache_snapshot_capacity},
      {"deltaserve:prefix_cache_host_loading", s.host_loading}};
  const char* gauge_help[] = {"K/V blocks the host tier holds.", "K/V block slots of the host tier.",
                              "DeltaNet state snapshots the host tier holds.", "State snapshot slots of the host tier.",
                              "Requests waiting for their prefix to load from the host tier."};
  for (size_t i = 0; i < std::size(gauges); ++i) {
    header(out, gauges[i].first, "gauge", gauge_help[i]);
    sample(out, gauges[i].first, m, gauges[i].second);
  }
  header(out, "deltaserve:prefix_cache_host_memory_bytes", "gauge",
         "Bytes of the host tier's memory that its blocks and snapshots hold (used), and all of it (capacity).");
  sample(out, "deltaserve:prefix_cache_host_memory_bytes", m + ",kind=\"used\"", static_cast<double>(s.host_cache_bytes));
  sample(out, "deltaserve:prefix_cache_host_memory_bytes", m + ",kind=\"capacity\"",
         static_cast<double>(s.host_cache_capacity_bytes));
  header(out, "deltaserve:prefix_cache_host_stored_total", "counter", "Evicted device entries copied to the host tier.");
  sample(out, "deltaserve:prefix_cache_host_stored_total", m + ",kind=\"block\"",
         static_cast<double>(s.host_cache_stored_blocks_total));
  sample(out, "deltaserve:prefix_cache_host_stored_total", m + ",kind=\"snapshot\"",
         static_cast<double>(s.host_cache_stored_snapshots_total));
  header(out, "deltaserve:prefix_cache_host_bytes_total", "counter",
         "Bytes copied between the device and the host tier (offload: to the host; load: back).");
  sample(out, "deltaserve:prefix_cache_host_bytes_total", m + ",direction=\"offload\"",
         static_cast<double>(s.host_cache_offload_bytes_total));
  sample(out, "deltaserve:prefix_cache_host_bytes_total", m + ",direction=\"load\"",
         static_cast<double>(s.host_cache_load_bytes_total));
  header(out, "deltaserve:prefix_cache_disk_files_total", "counter",
         "Disk-tier files written, read back at start-up, and refused as untrusted (corrupt, truncated, foreign).");
  sample(out, "deltaserve:prefix_cache_disk_files_total", m + ",event=\"written\"",
         static_cast<double>(s.disk_files_written_total));
  sample(out, "deltaserve:prefix_cache_disk_files_total", m + ",event=\"loaded\"",
         static_cast<double>(s.disk_files_loaded_total));
  sample(out, "deltaserve:prefix_cache_disk_files_total", m + ",event=\"refused\"",
         static_cast<double>(s.disk_files_refused_total));
  sample(out, "deltaserve:prefix_cache_disk_files_total", m + ",event=\"write_failed\"",
         static_cast<double>(s.disk_write_failures_total));
  header(out, "deltaserve:prefix_cache_disk_bytes", "gauge", "Bytes of this model's disk-tier files.");
  sample(out, "deltaserve:prefix_cache_disk_bytes", m, static_cast<double>(s.disk_bytes));
  const std::string name = "deltaserve:prefix_cache_host_load_seconds";
  header(out, name, "histogram", "Time from a host-tier load's start to the step that found it done.");
  histogram_samples(out, name, m, scheduler::EngineStats::kHostLoadSeconds,
                    [&](size_t i) { return s.host_load_buckets[i]; }, static_cast<uint64_t>(s.host_loads_total),
                    s.host_load_seconds_total);
}

}  // namespace

ServerMetrics::ServerMetrics(std::string model_name)
    : model_name_(std::move(model_name)),
      ttft_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10,
             20, 40, 80, 160, 640, 2560}),
      itl_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1,
            2.5, 5, 7.5, 10, 20, 40, 80}),
      e2e_({0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120,
            240, 480, 960, 1920, 7680}),
      queue_({0.001, 0.005, 0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40,
              50, 60, 120, 240, 480, 960, 1920, 7680}) {}

void ServerMetrics::observe_request(const scheduler::RequestMetrics& m) {
  std::lock_guard lock(mu_);
  if (m.was_scheduled) queue_.observe(m.queue_seconds());
  if (m.generated_tokens > 0) ttft_.observe(m.ttft_seconds());
  e2e_.observe(m.e2e_seconds());
}

void ServerMetrics::observe_ttft(double s) {
  std::lock_guard lock(mu_);
  ttft_.observe(s);
}
void ServerMetrics::observe_inter_token(double s) {
  std::lock_guard lock(mu_);
  itl_.observe(s);
}
void ServerMetrics::observe_e2e(double s) {
  std::lock_guard lock(mu_);
  e2e_.observe(s);
}
void ServerMetrics::observe_queue(double s) {
  std::lock_guard lock(mu_);
  queue_.observe(s);
}
void ServerMetrics::count_finished(std::string_view reason) {
  std::lock_guard lock(mu_);
  auto it = finished_.find(reason);
  if (it == finished_.end()) it = finished_.emplace(std::string(reason), 0).first;
  ++it->second;
}
void ServerMetrics::count_http(int status) {
  std::lock_guard lock(mu_);
  ++http_[status];
}
void ServerMetrics::set_instance_id(std::string id) {
  std::lock_guard lock(mu_);
  instance_id_ = std::move(id);
}

uint64_t ServerMetrics::http_count(int status) const {
  std::lock_guard lock(mu_);
  auto it = http_.find(status);
  return it == http_.end() ? 0 : it->second;
}

std::string ServerMetrics::render(const scheduler::EngineStats* st) const {
  const std::string m = "model_name=" + quote(model_name_);
  std::string out;
  out.reserve(16384);
  scheduler::EngineStats zero;
  const scheduler::EngineStats& s = st ? *st : zero;

  if (!instance_id_.empty()) {
    header(out, "deltaserve:instance_info", "gauge", "This replica (--instance-id).");
    sample(out, "deltaserve:instance_info", m + ",instance_id=" + quote(instance_id_), 1);
  }
  header(out, "vllm:num_requests_running", "gauge", "Requests running (each holds a DeltaNet state slot).");
  sample(out, "vllm:num_requests_running", m, s.running);
  header(out, "vllm:num_requests_waiting", "gauge", "Requests accepted and waiting to run (queued or preempted).");
  sample(out, "vllm:num_requests_waiting", m, s.waiting);
  // As vLLM counts it: blocks the prefix cache alone keeps are free (any admission may evict
  // them), so an idle server reads 0 however warm its cache, and autoscalers see load.
  header(out, "vllm:kv_cache_usage_perc", "gauge",
         "Fraction of K/V cache blocks that requests hold (1 = full); prefix-cache blocks no request uses count as free.");
  sample(out, "vllm:kv_cache_usage_perc", m,
         s.blocks_total > 0 ? static_cast<double>(s.blocks_used - s.prefix_cache_evictable) / s.blocks_total : 0.0);
  header(out, "deltaserve:kv_cache_blocks_used", "gauge",
         "K/V cache blocks in use, the prefix cache's evictable ones included.");
  sample(out, "deltaserve:kv_cache_blocks_used", m, s.blocks_used);
  header(out, "deltaserve:kv_cache_blocks_total", "gauge", "K/V cache blocks in the pool.");
  sample(out, "deltaserve:kv_cache_blocks_total", m, s.blocks_total);
  header(out, "deltaserve:kv_cache_block_size_tokens", "gauge", "Tokens per K/V cache block.");
  sample(out, "deltaserve:kv_cache_block_size_tokens", m, s.block_size);
  header(out, "deltaserve:state_slots_used", "gauge", "DeltaNet state slots in use.");
  sample(out, "deltaserve:state_slots_used", m, s.slots_used);
  header(out, "deltaserve:state_slots_total", "gauge", "DeltaNet state slots in the pool.");
  sample(out, "deltaserve:state_slots_total", m, s.slots_total);
  header(out, "deltaserve:max_ctx_tokens", "gauge", "Context limit per request (prompt + generated tokens).");
  sample(out, "deltaserve:max_ctx_tokens", m, static_cast<double>(s.max_ctx));

  header(out, "deltaserve:prefix_cache_blocks", "gauge", "K/V blocks the prefix cache holds (some also in use).");
  sample(out, "deltaserve:prefix_cache_blocks", m, s.prefix_cache_blocks);
  header(out, "deltaserve:prefix_cache_evictable_blocks", "gauge", "Prefix-cache blocks no running sequence uses.");
  sample(out, "deltaserve:prefix_cache_evictable_blocks", m, s.prefix_cache_evictable);
  header(out, "deltaserve:prefix_cache_snapshots", "gauge", "DeltaNet state snapshots the prefix cache holds.");
  sample(out, "deltaserve:prefix_cache_snapshots", m, s.prefix_cache_snapshots);
  header(out, "deltaserve:prefix_cache_snapshot_capacity", "gauge", "DeltaNet state snapshot slots.");
  sample(out, "deltaserve:prefix_cache_snapshot_capacity", m, s.prefix_cache_snapshot_capacity);
  header(out, "vllm:prefix_cache_queries_total", "counter", "Tokens looked up in the prefix cache at admission.");
  sample(out, "vllm:prefix_cache_queries_total", m, static_cast<double>(s.prefix_cache_queries_total));
  header(out, "vllm:prefix_cache_hits_total", "counter", "Tokens found in the prefix cache at admission.");
  sample(out, "vllm:prefix_cache_hits_total", m, static_cast<double>(s.prefix_cache_hits_total));
  render_host_tier(out, m, s);

  header(out, "deltaserve:lora_slots", "gauge", "LoRA adapter slots in the model's memory (--max-loras).");
  sample(out, "deltaserve:lora_slots", m, static_cast<double>(s.lora_slots_total));
  header(out, "deltaserve:lora_slots_pinned", "gauge", "LoRA slots pinned by running requests.");
  sample(out, "deltaserve:lora_slots_pinned", m, static_cast<double>(s.lora_slots_pinned));
  header(out, "deltaserve:lora_loads_total", "counter", "LoRA adapters copied into a slot (a slot-pool miss).");
  sample(out, "deltaserve:lora_loads_total", m, static_cast<double>(s.lora_loads_total));

  header(out, "deltaserve:images_encoded_total", "counter", "Images run through the vision encoder.");
  sample(out, "deltaserve:images_encoded_total", m, static_cast<double>(s.images_encoded_total));
  header(out, "deltaserve:encoder_seconds_total", "counter", "Engine time in the vision encoder (part of the forward time).");
  sample(out, "deltaserve:encoder_seconds_total", m, s.encoder_seconds_total);
  header(out, "deltaserve:encoder_cache_hits_total", "counter", "Images whose encoder output was found in the encoder cache.");
  sample(out, "deltaserve:encoder_cache_hits_total", m, static_cast<double>(s.encoder_cache_hits_total));
  header(out, "deltaserve:encoder_cache_misses_total", "counter", "Images looked up in the encoder cache and not found.");
  sample(out, "deltaserve:encoder_cache_misses_total", m, static_cast<double>(s.encoder_cache_misses_total));
  header(out, "deltaserve:encoder_cache_evictions_total", "counter", "Encoder outputs evicted from the encoder cache.");
  sample(out, "deltaserve:encoder_cache_evictions_total", m, static_cast<double>(s.encoder_cache_evictions_total));
  header(out, "deltaserve:encoder_cache_bytes", "gauge", "Bytes of encoder outputs the encoder cache holds.");
  sample(out, "deltaserve:encoder_cache_bytes", m, static_cast<double>(s.encoder_cache_bytes));
  header(out, "deltaserve:encoder_cache_capacity_bytes", "gauge", "The encoder cache's budget in bytes.");
  sample(out, "deltaserve:encoder_cache_capacity_bytes", m, static_cast<double>(s.encoder_cache_capacity_bytes));

  header(out, "deltaserve:engine_iterations_total", "counter", "Engine steps (forward passes).");
  sample(out, "deltaserve:engine_iterations_total", m, static_cast<double>(s.iterations_total));
  header(out, "deltaserve:engine_schedule_seconds_total", "counter", "Engine time spent planning steps.");
  sample(out, "deltaserve:engine_schedule_seconds_total", m, s.schedule_seconds_total);
  header(out, "deltaserve:engine_forward_seconds_total", "counter",
         "Engine time in the model call (on a GPU: until the call returns, not until the GPU is done).");
  sample(out, "deltaserve:engine_forward_seconds_total", m, s.forward_seconds_total);
  header(out, "deltaserve:engine_sample_seconds_total", "counter",
         "Engine time sampling and recording results (on a GPU this includes waiting for the step).");
  sample(out, "deltaserve:engine_sample_seconds_total", m, s.sample_seconds_total);
  header(out, "deltaserve:engine_grammar_mask_seconds_total", "counter",
         "Of the sampling time, filling structured outputs' token masks.");
  sample(out, "deltaserve:engine_grammar_mask_seconds_total", m, s.grammar_mask_seconds_total);
  header(out, "deltaserve:engine_grammar_masks_total", "counter", "Structured-output token masks filled.");
  sample(out, "deltaserve:engine_grammar_masks_total", m, static_cast<double>(s.grammar_masks_total));

  header(out, "deltaserve:engine_draft_seconds_total", "counter", "Engine time drafting (speculative decoding).");
  sample(out, "deltaserve:engine_draft_seconds_total", m, s.draft_seconds_total);
  if (s.num_speculative_tokens > 0) {
    header(out, "vllm:spec_decode_num_drafts_total", "counter", "Verify steps of speculating sequences.");
    sample(out, "vllm:spec_decode_num_drafts_total", m, static_cast<double>(s.spec_decode_drafts_total));
    header(out, "vllm:spec_decode_num_draft_tokens_total", "counter", "Drafted tokens verified.");
    sample(out, "vllm:spec_decode_num_draft_tokens_total", m, static_cast<double>(s.spec_decode_draft_tokens_total));
    header(out, "vllm:spec_decode_num_accepted_tokens_total", "counter", "Drafted tokens accepted.");
    sample(out, "vllm:spec_decode_num_accepted_tokens_total", m,
           static_cast<double>(s.spec_decode_accepted_tokens_total));
    header(out, "vllm:spec_decode_num_accepted_tokens_per_pos_total", "counter",
           "Drafted tokens accepted, by position in the draft (0 = first).");
    for (size_t i = 0; i < s.spec_decode_accepted_per_position.size(); ++i)
      sample(out, "vllm:spec_decode_num_accepted_tokens_per_pos_total", m + ",position=\"" + std::to_string(i) + "\"",
             static_cast<double>(s.spec_decode_accepted_per_position[i]));
  }

  header(out, "vllm:prompt_tokens_total", "counter", "Prompt tokens of admitted requests.");
  sample(out, "vllm:prompt_tokens_total", m, static_cast<double>(s.prompt_tokens_total));
  header(out, "vllm:generation_tokens_total", "counter", "Generated tokens.");
  sample(out, "vllm:generation_tokens_total", m, static_cast<double>(s.generated_tokens_total));
  header(out, "vllm:num_preemptions_total", "counter", "Preemptions (recompute).");
  sample(out, "vllm:num_preemptions_total", m, static_cast<double>(s.preemptions_total));

  std::lock_guard lock(mu_);
  header(out, "vllm:request_success_total", "counter", "Finished sequences by finish reason.");
  for (std::string_view r : {"stop", "length", "tool_calls", "abort", "error"}) {
    auto it = finished_.find(r);
    sample(out, "vllm:request_success_total", m + ",finished_reason=" + quote(r),
           static_cast<double>(it == finished_.end() ? 0 : it->second));
  }
  header(out, "deltaserve:http_requests_total", "counter", "HTTP responses by status code.");
  for (const auto& [code, n] : http_)
    sample(out, "deltaserve:http_requests_total", m + ",code=\"" + std::to_string(code) + "\"",
           static_cast<double>(n));

  header(out, "vllm:time_to_first_token_seconds", "histogram", "Time to first token (from submission).");
  ttft_.render(out, "vllm:time_to_first_token_seconds", m);
  header(out, "vllm:inter_token_latency_seconds", "histogram", "Time between consecutive tokens of a sequence.");
  itl_.render(out, "vllm:inter_token_latency_seconds", m);
  header(out, "vllm:e2e_request_latency_seconds", "histogram", "End-to-end latency of a sequence (submission to finish).");
  e2e_.render(out, "vllm:e2e_request_latency_seconds", m);
  header(out, "vllm:request_queue_time_seconds", "histogram", "Time from submission to first scheduling.");
  queue_.render(out, "vllm:request_queue_time_seconds", m);
  return out;
}

}  // namespace ds::server
