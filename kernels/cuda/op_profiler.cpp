// OpProfiler (op_profiler.h): event pairs around the wrapped backend's ops.
#include "kernels/cuda/op_profiler.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <utility>

#include "kernels/cuda/backend_ops.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"

namespace ds::cuda {

using kernels::BatchPlan;
using kernels::Tensor;

OpProfiler::OpProfiler(kernels::Backend& inner) : inner_(inner), stream_(backend_stream(inner)) {}

OpProfiler::~OpProfiler() {
  cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
  for (const Timing& t : timing_) free_events_.insert(free_events_.end(), {t.start, t.end});
  for (void* e : free_events_) cudaEventDestroy(static_cast<cudaEvent_t>(e));
}

void* OpProfiler::event() {
  if (free_events_.empty()) {
    cudaEvent_t e;
    ops::check_cuda(cudaEventCreate(&e), "profile: cudaEventCreate");
    return e;
  }
  void* e = free_events_.back();
  free_events_.pop_back();
  return e;
}

template <typename F>
void OpProfiler::timed(const std::string& op, F&& f) {
  if (!enabled_) {
    f();
    return;
  }
  Timing t{op, event(), event()};
  ops::check_cuda(cudaEventRecord(static_cast<cudaEvent_t>(t.start), static_cast<cudaStream_t>(stream_)), "profile");
  try {
    f();
  } catch (...) {
    free_events_.insert(free_events_.end(), {t.start, t.end});
    throw;
  }
  ops::check_cuda(cudaEventRecord(static_cast<cudaEvent_t>(t.end), static_cast<cudaStream_t>(stream_)), "profile");
  timing_.push_back(std::move(t));
}

std::string OpProfiler::report() {
  inner_.synchronize();
  for (const Timing& t : timing_) {
    float ms = 0;
    ops::check_cuda(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(t.start), static_cast<cudaEvent_t>(t.end)),
                    "profile: elapsed");
    auto& [total, count] = totals_[t.name];
    total += ms;
    ++count;
    free_events_.insert(free_events_.end(), {t.start, t.end});
  }
  timing_.clear();
  std::vector<std::pair<std::string, std::pair<double, int64_t>>> rows(totals_.begin(), totals_.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  double sum = 0;
  for (const auto& r : rows) sum += r.second.first;
  std::string out;
  char buf[200];
  for (const auto& [name, v] : rows) {
    std::snprintf(buf, sizeof buf, "  %-32s %9.3f ms %6lld calls %8.2f us/call %5.1f%%\n", name.c_str(), v.first,
                  static_cast<long long>(v.second), 1e3 * v.first / static_cast<double>(v.second),
                  100.0 * v.first / std::max(sum, 1e-9));
    out += buf;
  }
  std::snprintf(buf, sizeof buf, "  %-32s %9.3f ms (sum of op times; gaps between ops not included)\n", "total", sum);
  out += buf;
  totals_.clear();
  return out;
}

namespace {

bool all_rows_at_most(const BatchPlan& plan, int64_t n) {
  return std::all_of(plan.seqs().begin(), plan.seqs().end(), [n](const BatchPlan::Seq& s) { return s.n_tokens <= n; });
}

}  // namespace

void OpProfiler::do_fill_zero(Tensor& t) {
  timed("fill_zero", [&] { inner_.fill_zero(t); });
}
void OpProfiler::do_copy(const Tensor& src, Tensor& dst) {
  timed("copy", [&] { inner_.copy(src, dst); });
}
void OpProfiler::do_copy_to_host(const Tensor& src, std::span<float> dst) { inner_.copy_to_host(src, dst); }
void OpProfiler::do_copy_from_host(std::span<const float> src, Tensor& dst) { inner_.copy_from_host(src, dst); }
void OpProfiler::do_embedding(const Tensor& table, const BatchPlan& plan, Tensor& out) {
  timed("embedding", [&] { inner_.embedding(table, plan, out); });
}
void OpProfiler::do_gather_rows(const Tensor& x, const BatchPlan& plan, Tensor& out) {
  timed("gather_rows", [&] { inner_.gather_rows(x, plan, out); });
}
void OpProfiler::do_rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) {
  timed("rms_norm", [&] { inner_.rms_norm(x, weight, eps, out); });
}
void OpProfiler::do_gemm(const Tensor& x, const Tensor& w, Tensor& out, bool accumulate) {
  timed(enabled_ ? "gemm N=" + std::to_string(w.dim(0)) : std::string(), [&] { inner_.gemm(x, w, out, accumulate); });
}
void OpProfiler::do_gemm_bias(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& out, bool accumulate) {
  timed(enabled_ ? "gemm_bias N=" + std::to_string(w.dim(0)) : std::string(),
        [&] { inner_.gemm_bias(x, w, bias, out, accumulate); });
}
void OpProfiler::do_swiglu(const Tensor& gate_up, Tensor& out) {
  timed("swiglu", [&] { inner_.swiglu(gate_up, out); });
}
void OpProfiler::do_gate_up_swiglu(const Tensor& x, const Tensor& gate_up, Tensor& scratch, Tensor& out) {
  timed("gate_up_swiglu", [&] { inner_.gate_up_swiglu(x, gate_up, scratch, out); });
}
void OpProfiler::do_split_query_gate(const Tensor& qg, Tensor& q, Tensor& gate) {
  timed("split_query_gate", [&] { inner_.split_query_gate(qg, q, gate); });
}
void OpProfiler::do_split_columns(const Tensor& x, std::span<Tensor> parts) {
  timed("split_columns", [&] { inner_.split_columns(x, parts); });
}
void OpProfiler::do_rope(Tensor& x, const BatchPlan& plan, const kernels::RopeParams& params) {
  timed("rope", [&] { inner_.rope(x, plan, params); });
}
void OpProfiler::do_prepare_qk(const Tensor& qg, const Tensor& q_norm, const Tensor& k_norm, float eps,
                               const BatchPlan& plan, const kernels::RopeParams& rope_params, Tensor& q, Tensor& gate,
                               Tensor& k) {
  timed("prepare_qk", [&] { inner_.prepare_qk(qg, q_norm, k_norm, eps, plan, rope_params, q, gate, k); });
}
void OpProfiler::do_sigmoid_gate(Tensor& x, const Tensor& gate) {
  timed("sigmoid_gate", [&] { inner_.sigmoid_gate(x, gate); });
}
void OpProfiler::do_kv_write(const Tensor& k, const Tensor& v, const BatchPlan& plan, Tensor& k_pool,
                             Tensor& v_pool) {
  timed("kv_write", [&] { inner_.kv_write(k, v, plan, k_pool, v_pool); });
}
void OpProfiler::do_paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                                    const BatchPlan& plan, float scale, Tensor& out) {
  const char* name = all_rows_at_most(plan, 1) ? "paged_attention(decode)" : "paged_attention(with prefill)";
  timed(name, [&] { inner_.paged_attention(q, k_pool, v_pool, plan, scale, out); });
}
void OpProfiler::do_causal_conv1d(const Tensor& x, const Tensor& weight, Tensor& conv_state, int64_t layer,
                                  const BatchPlan& plan, Tensor& out) {
  timed("causal_conv1d", [&] { inner_.causal_conv1d(x, weight, conv_state, layer, plan, out); });
}
void OpProfiler::do_gated_delta_rule(const Tensor& qkv, const Tensor& a, const Tensor& b, const Tensor& a_log,
                                     const Tensor& dt_bias, Tensor& recurrent_state, int64_t layer,
                                     const BatchPlan& plan, const kernels::DeltaNetDims& dims, Tensor& out) {
  const char* name = all_rows_at_most(plan, ops::kDeltaNetRecurrentMaxTokens) ? "gated_delta_rule(recurrent)"
                                                                               : "gated_delta_rule(with chunks)";
  timed(name, [&] { inner_.gated_delta_rule(qkv, a, b, a_log, dt_bias, recurrent_state, layer, plan, dims, out); });
}
void OpProfiler::do_gated_rms_norm(const Tensor& x, const Tensor& z, const Tensor& weight, float eps, Tensor& out) {
  timed("gated_rms_norm", [&] { inner_.gated_rms_norm(x, z, weight, eps, out); });
}

void OpProfiler::do_lora_shrink(const Tensor& x, const Tensor& a, const BatchPlan& plan, Tensor& tmp) {
  timed("lora_shrink", [&] { inner_.lora_shrink(x, a, plan, tmp); });
}
void OpProfiler::do_lora_expand(const Tensor& tmp, int64_t first_rank, const Tensor& b, const BatchPlan& plan,
                                int64_t col_offset, Tensor& out) {
  timed("lora_expand", [&] { inner_.lora_expand(tmp, first_rank, b, plan, col_offset, out); });
}
void OpProfiler::do_lora_expand_group(const Tensor& tmp, std::span<const kernels::LoraExpandMember> members,
                                      const BatchPlan& plan) {
  timed("lora_expand_group", [&] { inner_.lora_expand_group(tmp, members, plan); });
}

void OpProfiler::do_layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& out) {
  timed("layer_norm", [&] { inner_.layer_norm(x, weight, bias, eps, out); });
}

void OpProfiler::do_add_bias(Tensor& x, const Tensor& bias) {
  timed("add_bias", [&] { inner_.add_bias(x, bias); });
}

void OpProfiler::do_gelu(const Tensor& x, const Tensor& bias, Gelu kind, Tensor& out) {
  timed("gelu", [&] { inner_.gelu(x, bias, kind, out); });
}

void OpProfiler::do_gemm_bias_gelu(const Tensor& x, const Tensor& w, const Tensor& bias, Gelu kind, Tensor& scratch,
                                   Tensor& out) {
  timed(enabled_ ? "gemm_bias_gelu N=" + std::to_string(w.dim(0)) : std::string(),
        [&] { inner_.gemm_bias_gelu(x, w, bias, kind, scratch, out); });
}

void OpProfiler::do_add_position_embedding(const Tensor& table, const kernels::VisionPlan& plan, Tensor& x) {
  timed("add_position_embedding", [&] { inner_.add_position_embedding(table, plan, x); });
}

void OpProfiler::do_rotary_embedding(Tensor& x, const kernels::VisionPlan& plan) {
  timed("rotary_embedding", [&] { inner_.rotary_embedding(x, plan); });
}

void OpProfiler::do_qkv_segment_attention(Tensor& qkv, const Tensor& bias, const kernels::VisionPlan& plan,
                                          float scale, Tensor& scratch, Tensor& out) {
  timed("qkv_segment_attention", [&] { inner_.qkv_segment_attention(qkv, bias, plan, scale, scratch, out); });
}

void OpProfiler::do_segment_attention(const Tensor& q, const Tensor& k, const Tensor& v, const kernels::VisionPlan& plan,
                                      float scale, Tensor& out) {
  timed("segment_attention", [&] { inner_.segment_attention(q, k, v, plan, scale, out); });
}

}  // namespace ds::cuda
