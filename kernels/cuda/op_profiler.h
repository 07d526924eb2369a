// OpProfiler: per-op GPU time of a CUDA backend, for benchmarks. It is a Backend that forwards
// everything to the backend it wraps and, while enabled, brackets each op with a CUDA event
// pair on that backend's stream. Load a model on the profiler to profile its forward; the
// backend itself carries no profiling code.
//
//   cuda::OpProfiler prof(*backend);
//   auto model = qwen35::Model::load(prof, dir);
//   prof.set_enabled(true); ...; std::puts(prof.report().c_str());
//
// Ops are named as the backend runs them: each GEMM by its N, attention and the delta rule by
// the path the batch takes. Composite ops (prepare_qk, gate_up_swiglu, qkv_segment_attention)
// count as one.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"

namespace ds::cuda {

class OpProfiler final : public kernels::Backend {
 public:
  // inner: a CUDA backend (throws std::invalid_argument otherwise), outliving the profiler.
  explicit OpProfiler(kernels::Backend& inner);
  ~OpProfiler() override;

  void set_enabled(bool on) { enabled_ = on; }
  // Each op's total, calls and share since the last report, largest first; clears them.
  std::string report();

  std::string_view name() const override { return inner_.name(); }
  kernels::Tensor alloc(DType dtype, const kernels::Shape& shape) override { return inner_.alloc(dtype, shape); }
  kernels::Tensor upload(const kernels::HostTensor& src) override { return inner_.upload(src); }
  DType kv_cache_dtype() const override { return inner_.kv_cache_dtype(); }
  DType activation_dtype() const override { return inner_.activation_dtype(); }
  bool fp8_weights() const override { return inner_.fp8_weights(); }
  bool int4_weights() const override { return inner_.int4_weights(); }
  DeviceMemory device_memory() const override { return inner_.device_memory(); }
  void synchronize() override { inner_.synchronize(); }
  std::shared_ptr<void> alloc_host(int64_t bytes) override { return inner_.alloc_host(bytes); }
  bool transfer_done(uint64_t ticket) override { return inner_.transfer_done(ticket); }
  void wait_transfer(uint64_t ticket) override { inner_.wait_transfer(ticket); }
  void order_after(uint64_t ticket) override { inner_.order_after(ticket); }
  std::unique_ptr<kernels::BatchPlan> plan(const kernels::BatchDesc& desc) override { return inner_.plan(desc); }
  std::unique_ptr<kernels::VisionPlan> plan_vision(const kernels::VisionBatchDesc& desc) override {
    return inner_.plan_vision(desc);
  }
  int64_t fused_projection_rows() const override { return inner_.fused_projection_rows(); }

 protected:
  void do_fill_zero(kernels::Tensor& t) override;
  void do_copy(const kernels::Tensor& src, kernels::Tensor& dst) override;
  uint64_t do_transfer(std::span<const HostCopy> copies, bool to_host) override {
    return inner_.transfer(copies, to_host);  // not timed: the copies run beside the ops
  }
  void do_copy_to_host(const kernels::Tensor& src, std::span<float> dst) override;
  void do_copy_from_host(std::span<const float> src, kernels::Tensor& dst) override;
  void do_embedding(const kernels::Tensor& table, const kernels::BatchPlan& plan, kernels::Tensor& out) override;
  void do_gather_rows(const kernels::Tensor& x, const kernels::BatchPlan& plan, kernels::Tensor& out) override;
  void do_rms_norm(const kernels::Tensor& x, const kernels::Tensor& weight, float eps, kernels::Tensor& out) override;
  void do_gemm(const kernels::Tensor& x, const kernels::Tensor& w, kernels::Tensor& out, bool accumulate) override;
  void do_gemm_bias(const kernels::Tensor& x, const kernels::Tensor& w, const kernels::Tensor& bias,
                    kernels::Tensor& out, bool accumulate) override;
  void do_swiglu(const kernels::Tensor& gate_up, kernels::Tensor& out) override;
  void do_gate_up_swiglu(const kernels::Tensor& x, const kernels::Tensor& gate_up, kernels::Tensor& scratch,
                         kernels::Tensor& out) override;
  void do_split_query_gate(const kernels::Tensor& qg, kernels::Tensor& q, kernels::Tensor& gate) override;
  void do_split_columns(const kernels::Tensor& x, std::span<kernels::Tensor> parts) override;
  void do_rope(kernels::Tensor& x, const kernels::BatchPlan& plan, const kernels::RopeParams& params) override;
  void do_prepare_qk(const kernels::Tensor& qg, const kernels::Tensor& q_norm, const kernels::Tensor& k_norm, float eps,
                     const kernels::BatchPlan& plan, const kernels::RopeParams& rope_params, kernels::Tensor& q,
                     kernels::Tensor& gate, kernels::Tensor& k) override;
  void do_sigmoid_gate(kernels::Tensor& x, const kernels::Tensor& gate) override;
  void do_kv_write(const kernels::Tensor& k, const kernels::Tensor& v, const kernels::BatchPlan& plan,
                   kernels::Tensor& k_pool, kernels::Tensor& v_pool) override;
  void do_paged_attention(const kernels::Tensor& q, const kernels::Tensor& k_pool, const kernels::Tensor& v_pool,
                          const kernels::BatchPlan& plan, float scale, kernels::Tensor& out) override;
  void do_causal_conv1d(const kernels::Tensor& x, const kernels::Tensor& weight, kernels::Tensor& conv_state,
                        int64_t layer, const kernels::BatchPlan& plan, kernels::Tensor& out) override;
  void do_gated_delta_rule(const kernels::Tensor& qkv, const kernels::Tensor& a, const kernels::Tensor& b,
                           const kernels::Tensor& a_log, const kernels::Tensor& dt_bias,
                           kernels::Tensor& recurrent_state, int64_t layer, const kernels::BatchPlan& plan,
                           const kernels::DeltaNetDims& dims, kernels::Tensor& out) override;
  void do_gated_rms_norm(const kernels::Tensor& x, const kernels::Tensor& z, const kernels::Tensor& weight, float eps,
                         kernels::Tensor& out) override;
  void do_lora_shrink(const kernels::Tensor& x, const kernels::Tensor& a, const kernels::BatchPlan& plan,
                      kernels::Tensor& tmp) override;
  void do_lora_expand(const kernels::Tensor& tmp, int64_t first_rank, const kernels::Tensor& b,
                      const kernels::BatchPlan& plan, int64_t col_offset, kernels::Tensor& out) override;
  void do_lora_expand_group(const kernels::Tensor& tmp, std::span<const kernels::LoraExpandMember> members,
                            const kernels::BatchPlan& plan) override;
  void do_layer_norm(const kernels::Tensor& x, const kernels::Tensor& weight, const kernels::Tensor& bias, float eps,
                     kernels::Tensor& out) override;
  void do_add_bias(kernels::Tensor& x, const kernels::Tensor& bias) override;
  void do_gelu(const kernels::Tensor& x, const kernels::Tensor& bias, Gelu kind, kernels::Tensor& out) override;
  void do_gemm_bias_gelu(const kernels::Tensor& x, const kernels::Tensor& w, const kernels::Tensor& bias, Gelu kind,
                         kernels::Tensor& scratch, kernels::Tensor& out) override;
  void do_add_position_embedding(const kernels::Tensor& table, const kernels::VisionPlan& plan,
                                 kernels::Tensor& x) override;
  void do_rotary_embedding(kernels::Tensor& x, const kernels::VisionPlan& plan) override;
  void do_qkv_segment_attention(kernels::Tensor& qkv, const kernels::Tensor& bias, const kernels::VisionPlan& plan,
                                float scale, kernels::Tensor& scratch, kernels::Tensor& out) override;
  void do_segment_attention(const kernels::Tensor& q, const kernels::Tensor& k, const kernels::Tensor& v,
                            const kernels::VisionPlan& plan, float scale, kernels::Tensor& out) override;

 private:
  // Runs f between an event pair named `op` (when enabled).
  template <typename F>
  void timed(const std::string& op, F&& f);
  void* event();

  kernels::Backend& inner_;
  void* stream_;
  bool enabled_ = false;
  struct Timing {
    std::string name;
    void *start, *end;
  };
  std::vector<Timing> timing_;
  std::vector<void*> free_events_;
  std::map<std::string, std::pair<double, int64_t>> totals_;  // ms, calls
};

}  // namespace ds::cuda
