// CudaBackend: device memory, weight upload, the step plan, and each op's launch. The Backend
// layer has checked each op's shapes and types (kernels/backend.cpp); what is checked here is
// only this backend's own limits.
#include "kernels/cuda/cuda_backend.h"

#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/common/half.h"
#include "kernels/int4.h"
#include "kernels/cuda/backend_ops.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cuda_attention.h"
#include "kernels/cuda/cuda_gemm.h"
#include "kernels/cuda/gemm_chooser.h"
#include "kernels/cuda/cuda_graphs.h"
#include "kernels/cuda/cuda_plan.h"
#include "kernels/cuda/cuda_transfers.h"
#include "kernels/cuda/cuda_vision_plan.h"

namespace ds::cuda {
namespace {

using kernels::BatchPlan;
using kernels::DeltaNetDims;
using kernels::HostTensor;
using kernels::LoraExpandMember;
using kernels::RopeParams;
using kernels::Shape;
using kernels::Tensor;

[[noreturn]] void fail(const char* op, const std::string& what) {
  throw std::invalid_argument(std::string(op) + ": " + what);
}

const CudaBatchPlan& cuda_plan(const BatchPlan& plan, const char* op) {
  const auto* p = dynamic_cast<const CudaBatchPlan*>(&plan);
  if (!p) fail(op, "the plan was not made by this backend");
  return *p;
}

const CudaVisionPlan& cuda_plan(const kernels::VisionPlan& plan, const char* op) {
  const auto* p = dynamic_cast<const CudaVisionPlan*>(&plan);
  if (!p) fail(op, "the vision plan was not made by this backend");
  return *p;
}

// DELTASERVE_CUDA_SYNC=1: every op waits for the device (a debugging aid: a fault is then
// reported by the op that caused it).
bool env_sync() {
  const char* v = std::getenv("DELTASERVE_CUDA_SYNC");
  return v && *v && std::string(v) != "0";
}

class CudaBackend final : public kernels::Backend {
 public:
  explicit CudaBackend(const CudaBackendOptions& o)
      : options_(o),
        ctx_(o.device, o.paths.chained_launches),
        attention_(ctx_, o.decode),
        transfers_(o.device, ctx_.stream()),
        sync_(o.sync_each_op || env_sync()) {}

  ~CudaBackend() override { cudaStreamSynchronize(ctx_.stream()); }

  std::string_view name() const override { return "cuda"; }
  DType kv_cache_dtype() const override { return options_.kv_dtype; }
  DType recurrent_state_dtype() const override { return options_.recurrent_state_dtype; }
  DType activation_dtype() const override { return options_.f32_weights ? DType::f32 : DType::bf16; }

  DeviceMemory device_memory() const override {
    size_t free_b = 0, total_b = 0;
    ops::check_cuda(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
    return {static_cast<int64_t>(free_b), static_cast<int64_t>(total_b)};
  }

  void synchronize() override { ops::check_cuda(cudaStreamSynchronize(ctx_.stream()), "synchronize (an op failed)"); }

  // Host transfers on copy streams of their own (cuda_transfers.h).
  std::shared_ptr<void> alloc_host(int64_t bytes) override { return transfers_.alloc_pinned(bytes); }
  bool transfer_done(uint64_t ticket) override { return transfers_.done(ticket); }
  void wait_transfer(uint64_t ticket) override { transfers_.wait(ticket); }
  void order_after(uint64_t ticket) override { transfers_.order_after(ticket); }

  void* stream() { return ctx_.stream(); }

  // Decode-sized steps fuse (a step's DeltaNet a/b projections are 32-row GEMMs that cost
  // their launch latency; see docs/bench-log).
  int64_t fused_projection_rows() const override { return options_.paths.fused_projection_rows; }

  // ---- memory

  Tensor alloc(DType dtype, const Shape& shape) override {
    const int64_t bytes = ds::row_bytes(dtype, shape.numel());
    void* p = ctx_.malloc_device(static_cast<size_t>(bytes), "a " + std::string(dtype_name(dtype)) + " tensor " + shape.str());
    return Tensor(std::shared_ptr<void>(p, [](void* q) { cudaFree(q); }), p, dtype, shape);
  }

  // FP8 weights stay FP8 (fp8_gemm.cu reads them) unless the options say otherwise; never in
  // the f32 reference mode.
  bool fp8_weights() const override { return options_.fp8_weights && !options_.f32_weights; }
  // 4-bit weights stay 4-bit (int4_gemm.cu reads them) unless the options say otherwise;
  // never in the f32 reference mode.
  bool int4_weights() const override { return options_.int4_weights && !options_.f32_weights; }

  Tensor upload(const HostTensor& src) override {
    if (src.dtype == DType::fp8_e4m3) return upload_fp8(src);
    if (src.dtype == DType::int4) return upload_int4(src);
    if (src.dtype != DType::f32 && src.dtype != DType::bf16 && src.dtype != DType::f16)
      fail("upload", "cannot load " + std::string(dtype_name(src.dtype)) + " weights");
    const int64_t n = src.shape.numel();
    const auto* bytes = static_cast<const unsigned char*>(src.data);
    // Matrices are GEMM operands (and the embedding table): bf16. Vectors and conv filters: f32.
    const bool matrix = src.shape.rank() == 2 && !options_.f32_weights;
    Tensor t = alloc(matrix ? DType::bf16 : DType::f32, src.shape);
    if (n == 0) return t;
    cudaStream_t s = ctx_.stream();
    if (matrix && src.dtype == DType::bf16) {
      ops::check_cuda(cudaMemcpyAsync(t.data(), bytes, static_cast<size_t>(n) * 2, cudaMemcpyHostToDevice, s),
                      "upload: cudaMemcpy");
    } else if (matrix) {
      std::vector<uint16_t> h(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) h[static_cast<size_t>(i)] = ds::f32_to_bf16(element(src, bytes, i));
      ops::check_cuda(cudaMemcpyAsync(t.data(), h.data(), h.size() * 2, cudaMemcpyHostToDevice, s), "upload: cudaMemcpy");
      ops::check_cuda(cudaStreamSynchronize(s), "upload");
    } else {
      std::vector<float> h(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) h[static_cast<size_t>(i)] = element(src, bytes, i);
      ops::check_cuda(cudaMemcpyAsync(t.data(), h.data(), h.size() * 4, cudaMemcpyHostToDevice, s), "upload: cudaMemcpy");
      ops::check_cuda(cudaStreamSynchronize(s), "upload");
    }
    ops::check_cuda(cudaStreamSynchronize(s), "upload");
    return t;
  }

  // Codes and scales in one allocation (the scales 256-byte aligned after the codes).
  Tensor upload_fp8(const HostTensor& src) {
    if (!fp8_weights() || src.shape.rank() != 2 || !src.scales.data)
      fail("upload", "fp8_e4m3 weights need a 2-D shape with scales and a backend that keeps them");
    const int64_t n = src.shape[0], k = src.shape[1];
    const kernels::Fp8Scales& hs = src.scales;
    const int64_t scale_count = hs.rows_for(n) * hs.cols;
    const int64_t code_bytes = (n * k + 255) / 256 * 256;
    const int64_t bytes = code_bytes + scale_count * 4;
    auto* p = static_cast<unsigned char*>(ctx_.malloc_device(static_cast<size_t>(bytes), "an fp8 weight " + src.shape.str()));
    std::shared_ptr<void> storage(p, [](void* q) { cudaFree(q); });
    cudaStream_t s = ctx_.stream();
    ops::check_cuda(cudaMemcpyAsync(p, src.data, static_cast<size_t>(n * k), cudaMemcpyHostToDevice, s), "upload: cudaMemcpy");
    ops::check_cuda(cudaMemcpyAsync(p + code_bytes, hs.data, static_cast<size_t>(scale_count) * 4, cudaMemcpyHostToDevice, s),
                    "upload: cudaMemcpy");
    ops::check_cuda(cudaStreamSynchronize(s), "upload");
    const kernels::Fp8Scales dev_scales{reinterpret_cast<const float*>(p + code_bytes), hs.cols, hs.row_shift};
    return Tensor(std::move(storage), p, src.shape, dev_scales);
  }

  // Codes, scales, zeros and permutation in one allocation (each part 256-byte aligned); the
  // codes rearranged on the device into the kernels' order (int4_gemm.cu). A weight the
  // kernels' layout does not hold (rows not in groups of 8, K not a multiple of 128, an odd
  // group size) is stored as bf16 values instead.
  Tensor upload_int4(const HostTensor& src) {
    const kernels::Int4Groups& hg = src.int4;
    if (!int4_weights() || src.shape.rank() != 2 || !hg.scales || !hg.zeros || hg.group_size <= 0 ||
        src.shape[1] % hg.group_size != 0)
      fail("upload", "int4 weights need a 2-D shape with groups and a backend that keeps them");
    const int64_t n = src.shape[0], k = src.shape[1], groups = n * (k / hg.group_size);
    if (!ops::int4_layout_supported(n, k, hg.group_size)) {
      std::vector<float> values(static_cast<size_t>(n * k));
      dequantize_int4_rows(src, 0, n, values.data());
      return upload(HostTensor{DType::f32, src.shape, values.data()});
    }
    const auto padded = [](int64_t b) { return (b + 255) / 256 * 256; };
    const int64_t code_bytes = padded(n * k / 2), scale_bytes = padded(groups * 4), zero_bytes = padded(groups);
    const int64_t perm_bytes = hg.perm ? k * 4 : 0;
    auto* p = static_cast<unsigned char*>(ctx_.malloc_device(static_cast<size_t>(code_bytes + scale_bytes + zero_bytes + perm_bytes),
                                                             "an int4 weight " + src.shape.str()));
    std::shared_ptr<void> storage(p, [](void* q) { cudaFree(q); });
    cudaStream_t s = ctx_.stream();
    const auto copy_to = [&](void* base, int64_t at, const void* from, int64_t bytes) {
      ops::check_cuda(cudaMemcpyAsync(static_cast<unsigned char*>(base) + at, from, static_cast<size_t>(bytes),
                                      cudaMemcpyHostToDevice, s),
                      "upload: cudaMemcpy");
    };
    const auto copy = [&](int64_t at, const void* from, int64_t bytes) { copy_to(p, at, from, bytes); };
    // The codes go through a staging buffer: the repacking moves bytes between rows.
    auto* staged = static_cast<uint8_t*>(ctx_.malloc_device(static_cast<size_t>(n * k / 2), "int4 staging " + src.shape.str()));
    std::unique_ptr<uint8_t, void (*)(uint8_t*)> staging(staged, [](uint8_t* q) { cudaFree(q); });
    copy_to(staged, 0, src.data, n * k / 2);
    copy(code_bytes, hg.scales, groups * 4);
    copy(code_bytes + scale_bytes, hg.zeros, groups);
    if (hg.perm) copy(code_bytes + scale_bytes + zero_bytes, hg.perm, perm_bytes);
    ops::repack_int4(staged, p, n, k, ops::Stream{s, false});
    ops::check_cuda(cudaStreamSynchronize(s), "upload");
    const kernels::Int4Groups dev{reinterpret_cast<const float*>(p + code_bytes), p + code_bytes + scale_bytes, hg.group_size,
                                  hg.perm ? reinterpret_cast<const int32_t*>(p + code_bytes + scale_bytes + zero_bytes) : nullptr};
    return Tensor(std::move(storage), p, src.shape, dev);
  }

  std::unique_ptr<BatchPlan> plan(const kernels::BatchDesc& desc) override {
    auto p = std::make_unique<CudaBatchPlan>(desc, uploader_, ctx_.stream(), ++generation_);
    after("plan");
    return p;
  }

  std::unique_ptr<kernels::VisionPlan> plan_vision(const kernels::VisionBatchDesc& desc) override {
    auto p = std::make_unique<CudaVisionPlan>(desc, ctx_);
    after("plan_vision");
    return p;
  }

  // ---- recorded steps (cuda_graphs.h). Not with sync_each_op, whose waits cannot be captured.
  bool can_record_steps() const override { return !sync_; }

  void begin_recording() override { begin_step_capture(ctx_.stream()); }

  std::unique_ptr<kernels::StepGraph> end_recording(std::string& why) override {
    return end_step_capture(ctx_.stream(), memory_epoch(), why);
  }

  bool replay(const kernels::StepGraph& graph) override {
    const auto* g = dynamic_cast<const CudaStepGraph*>(&graph);
    if (!g) fail("replay", "the recording was not made by this backend");
    if (g->epoch() != memory_epoch()) return false;
    launch_step_graph(*g, ctx_.stream());
    after("replay");
    return true;
  }

 protected:
  void do_fill_zero(Tensor& t) override {
    if (t.numel() > 0)
      ops::check_cuda(cudaMemsetAsync(t.data(), 0, static_cast<size_t>(t.bytes()), ctx_.stream()), "fill_zero");
    after("fill_zero");
  }

  void do_copy(const Tensor& src, Tensor& dst) override {
    ops::check_cuda(cudaMemcpyAsync(dst.data(), src.data(), static_cast<size_t>(src.bytes()), cudaMemcpyDeviceToDevice,
                                    ctx_.stream()),
                    "copy");
    after("copy");
  }

  uint64_t do_transfer(std::span<const HostCopy> copies, bool to_host) override {
    return transfers_.issue(copies, to_host);
  }

  void do_copy_to_host(const Tensor& src, std::span<float> dst) override {
    cudaStream_t s = ctx_.stream();
    if (src.dtype() == DType::f32) {
      ops::check_cuda(cudaMemcpyAsync(dst.data(), src.data(), dst.size() * 4, cudaMemcpyDeviceToHost, s),
                      "copy_to_host: cudaMemcpy");
      ops::check_cuda(cudaStreamSynchronize(s), "copy_to_host (an op of this step failed)");
    } else {
      std::vector<uint16_t> h(dst.size());
      ops::check_cuda(cudaMemcpyAsync(h.data(), src.data(), h.size() * 2, cudaMemcpyDeviceToHost, s),
                      "copy_to_host: cudaMemcpy");
      ops::check_cuda(cudaStreamSynchronize(s), "copy_to_host (an op of this step failed)");
      for (size_t i = 0; i < h.size(); ++i) dst[i] = ds::bf16_to_f32(h[i]);
    }
  }

  void do_copy_from_host(std::span<const float> src, Tensor& dst) override {
    cudaStream_t s = ctx_.stream();
    if (dst.dtype() == DType::f32) {
      ops::check_cuda(cudaMemcpyAsync(dst.data(), src.data(), src.size() * 4, cudaMemcpyHostToDevice, s),
                      "copy_from_host: cudaMemcpy");
      ops::check_cuda(cudaStreamSynchronize(s), "copy_from_host");
    } else {
      std::vector<uint16_t> h(src.size());
      for (size_t i = 0; i < h.size(); ++i) h[i] = ds::f32_to_bf16(src[i]);
      ops::check_cuda(cudaMemcpyAsync(dst.data(), h.data(), h.size() * 2, cudaMemcpyHostToDevice, s),
                      "copy_from_host: cudaMemcpy");
      ops::check_cuda(cudaStreamSynchronize(s), "copy_from_host");
    }
  }

  // ---- ops

  void do_embedding(const Tensor& table, const BatchPlan& plan, Tensor& out) override {
    const auto& p = cuda_plan(plan, "embedding");
    ops::embedding(table.data(), table.dtype(), p.d_token_ids, p.num_rows(), table.dim(1), out.data_as<float>(),
                   ctx_.stream());
    after("embedding");
  }

  void do_gather_rows(const Tensor& x, const BatchPlan& plan, Tensor& out) override {
    const auto& p = cuda_plan(plan, "gather_rows");
    ops::gather_rows(x.data_as<const float>(), p.d_logit_rows, static_cast<int64_t>(p.logit_rows().size()), x.dim(1),
                     out.data_as<float>(), ctx_.stream());
    after("gather_rows");
  }

  void do_rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) override {
    const int64_t d = weight.numel();
    ops::rms_norm(x.data(), x.dtype(), weight.data_as<const float>(), x.numel() / d, d, eps, out.data(), out.dtype(),
                  ctx_.stream());
    after("rms_norm");
  }

  void do_gemm(const Tensor& x, const Tensor& w, Tensor& out, bool accumulate) override {
    run_gemm(ctx_, options_.paths, x, w, out, accumulate);
    after("gemm");
  }

  void do_gemm_bias(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& out, bool accumulate) override {
    if (!run_gemm_bias(ctx_, options_.paths, x, w, bias, out, accumulate)) {
      kernels::Backend::do_gemm_bias(x, w, bias, out, accumulate);
      return;
    }
    after("gemm_bias");
  }

  void do_gemm_bias_gelu(const Tensor& x, const Tensor& w, const Tensor& bias, Gelu kind, Tensor& scratch,
                         Tensor& out) override {
    if (kind != Gelu::tanh || !run_gemm_bias_gelu(ctx_, options_.paths, x, w, bias, out)) {
      kernels::Backend::do_gemm_bias_gelu(x, w, bias, kind, scratch, out);
      return;
    }
    after("gemm_bias_gelu");
  }

  void do_swiglu(const Tensor& gate_up, Tensor& out) override {
    ops::swiglu(gate_up.data_as<const float>(), gate_up.dim(0), gate_up.dim(1) / 2, out.data(), out.dtype(),
                ctx_.stream());
    after("swiglu");
  }

  // The step's GEMM kernel (gemm_chooser.h) decides. One row (batch-1 decode): the gate and up
  // rows in one kernel that writes the SwiGLU product (the weight-streaming kernel, or FP8's
  // GEMV or tensor-core kernel, or the 4-bit kernel); steps on cuBLAS, the block-scaled FP8
  // GEMM or dequantised 4-bit tiles: the product in bf16, then the elementwise kernel;
  // otherwise the GEMM (f32 out) and the elementwise kernel.
  void do_gate_up_swiglu(const Tensor& x, const Tensor& w, Tensor& scratch, Tensor& out) override {
    const GemmKernel kernel = choose_gemm(gemm_shape(x, w), options_.paths);
    const bool bf16_row = x.dim(0) == 1 && x.dtype() == DType::bf16;
    const int64_t inter = w.dim(0) / 2, K = x.dim(1);
    bool done = false;
    switch (kernel) {
      case GemmKernel::cublas:
        done = run_gate_up_swiglu_tiled(ctx_, x, w, scratch, out);
        break;
      case GemmKernel::fp8_block:
        done = run_gate_up_swiglu_fp8_blocks(ctx_, options_.paths, x, w, scratch, out);
        break;
      case GemmKernel::gemv_bf16:
        if (!bf16_row) break;
        ops::gemv_swiglu_bf16(w.data_as<const uint16_t>(), x.data_as<const uint16_t>(), inter, K, out.data(),
                              out.dtype(), ctx_.stream());
        done = true;
        break;
      case GemmKernel::gemv_fp8:
      case GemmKernel::skinny_fp8: {
        if (!bf16_row) break;
        const auto& fs = w.fp8_scales();
        const ops::Fp8Weight fw{w.data_as<const uint8_t>(), fs.data, fs.cols, fs.row_shift};
        if (kernel == GemmKernel::skinny_fp8)
          ops::skinny_swiglu_fp8(fw, x.data_as<const uint16_t>(), inter, K, out.data(), out.dtype(), ctx_.stream());
        else
          ops::gemv_swiglu_fp8(fw, x.data_as<const uint16_t>(), inter, K, out.data(), out.dtype(), ctx_.stream());
        done = true;
        break;
      }
      case GemmKernel::skinny_int4:
      case GemmKernel::int4_dequant_tiles:
        done = run_gate_up_swiglu_int4(ctx_, kernel, x, w, scratch, out);
        break;
      case GemmKernel::skinny_bf16:
      case GemmKernel::fp8_dequant_tiles:
        break;
    }
    if (!done) {
      kernels::Backend::do_gate_up_swiglu(x, w, scratch, out);
      return;
    }
    after("gate_up_swiglu");
  }

  void do_split_query_gate(const Tensor& qg, Tensor& q, Tensor& gate) override {
    ops::split_query_gate(qg.data_as<const float>(), qg.dim(0) * qg.dim(1), qg.dim(2) / 2, q.data_as<float>(),
                          gate.data_as<float>(), ctx_.stream());
    after("split_query_gate");
  }

  void do_split_columns(const Tensor& x, std::span<Tensor> parts) override {
    const int64_t m = x.dim(0);
    ops::SplitParts sp{};
    sp.count = static_cast<int>(parts.size());
    for (size_t i = 0; i < parts.size(); ++i) {
      sp.dst[i] = parts[i].data_as<float>();
      sp.first[i + 1] = sp.first[i] + (m > 0 ? parts[i].numel() / m : 0);
    }
    ops::split_columns(x.data_as<const float>(), m, x.dim(1), sp, ctx_.stream());
    after("split_columns");
  }

  void do_rope(Tensor& x, const BatchPlan& plan, const RopeParams& params) override {
    const auto& p = cuda_plan(plan, "rope");
    const int64_t r = params.rotary_dim;
    ops::rope(x.data_as<float>(), rope_positions(p, params), x.dim(0), x.dim(1), x.dim(2), r, inv_freq(params),
              params.attention_scaling, ctx_.stream());
    after("rope");
  }

  void do_prepare_qk(const Tensor& qg, const Tensor& q_norm, const Tensor& k_norm, float eps, const BatchPlan& plan,
                     const RopeParams& params, Tensor& q, Tensor& gate, Tensor& k) override {
    const int64_t rows = qg.dim(0), nq = qg.dim(1), d = qg.dim(2) / 2;
    if (!ops::qk_norm_rope_supported(d)) {  // head dims the one-block-per-head kernel does not take
      kernels::Backend::do_prepare_qk(qg, q_norm, k_norm, eps, plan, params, q, gate, k);
      return;
    }
    const auto& p = cuda_plan(plan, "prepare_qk");
    const int64_t r = params.rotary_dim;
    ops::qk_norm_rope(qg.data_as<const float>(), q.data_as<float>(), gate.data_as<float>(), k.data_as<float>(),
                      q_norm.data_as<const float>(), k_norm.data_as<const float>(), rope_positions(p, params), rows, nq,
                      k.dim(1), d, eps, r, inv_freq(params), params.attention_scaling, ctx_.stream());
    after("prepare_qk");
  }

  void do_lora_shrink(const Tensor& x, const Tensor& a, const BatchPlan& plan, Tensor& tmp) override {
    const auto& p = cuda_plan(plan, "lora_shrink");
    if (!p.d_lora_tiles) return;  // no row has an adapter
    ops::lora_shrink(x.data(), x.dtype(), x.dim(0), x.dim(1), a.data_as<const float>(), a.dim(1), p.d_lora_tiles, p.n_lora_tiles,
                     p.d_lora_rows, tmp.data_as<float>(), ctx_.stream());
    after("lora_shrink");
  }

  // One expand's target in the launch table: its rank range of tmp, its first output column.
  static ops::LoraExpandTargets::Target lora_target(const Tensor& tmp, int64_t first_rank, const Tensor& b,
                                                    int64_t col_offset, const Tensor& out) {
    return {tmp.data_as<const float>() + first_rank, b.data_as<const float>(), out.data_as<float>() + col_offset,
            b.dim(2), b.dim(1), out.dim(1)};
  }

  void do_lora_expand(const Tensor& tmp, int64_t first_rank, const Tensor& b, const BatchPlan& plan,
                      int64_t col_offset, Tensor& out) override {
    const auto& p = cuda_plan(plan, "lora_expand");
    if (!p.d_lora_tiles) return;
    ops::LoraExpandTargets targets;
    targets.t[0] = lora_target(tmp, first_rank, b, col_offset, out);
    targets.count = 1;
    targets.ld_tmp = tmp.dim(1);
    ops::lora_expand(targets, p.d_lora_tiles, p.n_lora_tiles, p.d_lora_rows, ctx_.stream());
    after("lora_expand");
  }

  void do_lora_expand_group(const Tensor& tmp, std::span<const LoraExpandMember> members,
                            const BatchPlan& plan) override {
    static_assert(ops::kLoraExpandMaxTargets >= kMaxLoraExpandMembers);
    const auto& p = cuda_plan(plan, "lora_expand_group");
    if (!p.d_lora_tiles) return;
    ops::LoraExpandTargets targets;
    for (const LoraExpandMember& m : members)
      targets.t[targets.count++] = lora_target(tmp, m.first_rank, m.b, m.col_offset, m.out);
    targets.ld_tmp = tmp.dim(1);
    ops::lora_expand(targets, p.d_lora_tiles, p.n_lora_tiles, p.d_lora_rows, ctx_.stream());
    after("lora_expand_group");
  }

  void do_sigmoid_gate(Tensor& x, const Tensor& gate) override {
    ops::sigmoid_gate(x.data(), x.dtype(), gate.data_as<const float>(), x.numel(), ctx_.stream());
    after("sigmoid_gate");
  }

  void do_kv_write(const Tensor& k, const Tensor& v, const BatchPlan& plan, Tensor& k_pool, Tensor& v_pool) override {
    const auto& p = cuda_plan(plan, "kv_write");
    KvPoolView pools{k_pool.data(), v_pool.data(), options_.kv_dtype, options_.kv_dtype, k_pool.dim(0),
                     static_cast<int32_t>(k_pool.dim(1)), static_cast<int32_t>(k.dim(1)), static_cast<int32_t>(k.dim(2))};
    KvWrite w{k.data(), v.data(), DType::f32, static_cast<int32_t>(p.num_rows()), p.d_kv_slots, ctx_.stream().chained};
    write_kv(pools, w, false, nullptr, ctx_.stream());
    after("kv_write");
  }

  void do_paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool, const BatchPlan& plan,
                          float scale, Tensor& out) override {
    attention_.run(q, k_pool, v_pool, cuda_plan(plan, "paged_attention"), scale, out);
    after("paged_attention");
  }

  void do_causal_conv1d(const Tensor& x, const Tensor& weight, Tensor& conv_state, int64_t layer, const BatchPlan& plan,
                        Tensor& out) override {
    const char* op = "causal_conv1d";
    const auto& p = cuda_plan(plan, op);
    const int64_t ch = x.dim(1), kc = weight.dim(2);
    if (kc < 2 || kc > 5) fail(op, "kernel size must be 2..5, got " + std::to_string(kc));
    // Short sequences token by token; prefill chunks (the DeltaNet chunk list) in parallel.
    ops::causal_conv1d(x.data_as<const float>(), weight.data_as<const float>(), conv_state.data_as<float>(),
                       conv_state.dim(1), layer, p.d_seqs, p.d_rec_seq_ids, p.n_rec, p.d_row_state_slots,
                       p.d_snapshots, ch,
                       static_cast<int32_t>(kc),
                       out.data_as<float>(), ctx_.stream());
    if (p.n_chunk_items > 0 && kc - 1 > ops::kDeltaNetRecurrentMaxTokens) fail(op, "kernel size too large");
    ops::causal_conv1d_chunks(x.data_as<const float>(), weight.data_as<const float>(), conv_state.data_as<float>(),
                              conv_state.dim(1), layer, p.d_seqs, p.d_chunk_items, p.n_chunk_items, p.d_chunk_seqs,
                              p.n_chunk_seqs, ch, static_cast<int32_t>(kc), out.data_as<float>(), ctx_.stream());
    after(op);
  }

  void do_gated_delta_rule(const Tensor& qkv, const Tensor& a, const Tensor& b, const Tensor& a_log,
                           const Tensor& dt_bias, Tensor& recurrent_state, int64_t layer, const BatchPlan& plan,
                           const DeltaNetDims& dims, Tensor& out) override {
    const auto& p = cuda_plan(plan, "gated_delta_rule");
    ops::DeltaNetArgs g{};
    g.qkv = qkv.data_as<const float>();
    g.a = a.data_as<const float>();
    g.b = b.data_as<const float>();
    g.a_log = a_log.data_as<const float>();
    g.dt_bias = dt_bias.data_as<const float>();
    g.state = recurrent_state.data();
    g.state_type = recurrent_state.dtype();
    g.out = out.data_as<float>();
    g.n_layers = recurrent_state.dim(1);
    g.layer = layer;
    g.k_heads = static_cast<int32_t>(dims.k_heads);
    g.v_heads = static_cast<int32_t>(dims.v_heads);
    g.k_dim = static_cast<int32_t>(dims.k_dim);
    g.v_dim = static_cast<int32_t>(dims.v_dim);
    g.seqs = p.d_seqs;
    g.row_state_slots = p.d_row_state_slots;
    g.snapshots = p.d_snapshots;
    ops::deltanet_recurrent(g, p.d_rec_seq_ids, p.n_rec, ctx_.stream());
    if (p.n_chunk_items > 0) {
      const auto bytes = static_cast<size_t>(int64_t{p.n_chunk_items} * dims.v_heads * ops::kDeltaNetScratchFloats * 4);
      auto* scratch = static_cast<float*>(ctx_.scratch(Scratch::deltanet_chunks, bytes));
      // The reference mode keeps the chunk maths in fp32, as its GEMMs are (backend_ops.h).
      const auto math = options_.f32_weights ? ops::DeltaNetChunkMath::fp32 : ops::DeltaNetChunkMath::tensor_cores;
      ops::deltanet_chunked(g, p.d_chunk_items, p.n_chunk_items, p.d_chunk_seqs, p.n_chunk_seqs, scratch, math,
                            ctx_.n_sms(), ctx_.stream());
    }
    after("gated_delta_rule");
  }

  void do_gated_rms_norm(const Tensor& x, const Tensor& z, const Tensor& weight, float eps, Tensor& out) override {
    const int64_t d = weight.numel();
    ops::gated_rms_norm(x.data_as<const float>(), z.data_as<const float>(), weight.data_as<const float>(),
                        x.numel() / d, d, eps, out.data(), out.dtype(), ctx_.stream());
    after("gated_rms_norm");
  }

  // ---- the vision encoder (vision_ops.cu, segment_attention.cu)

  void do_layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& out) override {
    ops::layer_norm(x.data_as<const float>(), weight.data_as<const float>(), bias.data_as<const float>(), x.dim(0),
                    x.dim(1), eps, out.data(), out.dtype(), ctx_.stream());
    after("layer_norm");
  }

  void do_add_bias(Tensor& x, const Tensor& bias) override {
    ops::add_bias(x.data_as<float>(), bias.data_as<const float>(), x.dim(0), x.dim(1), ctx_.stream());
    after("add_bias");
  }

  void do_gelu(const Tensor& x, const Tensor& bias, Gelu kind, Tensor& out) override {
    ops::gelu(x.data_as<const float>(), bias.data_as<const float>(), x.dim(0), x.dim(1), kind == Gelu::tanh, out.data(),
              out.dtype(), ctx_.stream());
    after("gelu");
  }

  void do_add_position_embedding(const Tensor& table, const kernels::VisionPlan& plan, Tensor& x) override {
    const auto& p = cuda_plan(plan, "add_position_embedding");
    ops::add_position_embedding(table.data(), table.dtype(), p.d_pos_index, p.d_pos_weight, p.num_rows(), p.taps(),
                                x.dim(1), x.data_as<float>(), ctx_.stream());
    after("add_position_embedding");
  }

  void do_rotary_embedding(Tensor& x, const kernels::VisionPlan& plan) override {
    const auto& p = cuda_plan(plan, "rotary_embedding");
    ops::rotary_embedding(x.data_as<float>(), p.d_cos, p.d_sin, x.dim(0), x.dim(1), p.rope_half(), ctx_.stream());
    after("rotary_embedding");
  }

  void do_segment_attention(const Tensor& q, const Tensor& k, const Tensor& v, const kernels::VisionPlan& plan,
                            float scale, Tensor& out) override {
    const char* op = "segment_attention";
    const auto& p = cuda_plan(plan, op);
    if (!ops::segment_attention_supported(q.dim(2))) fail(op, "head size " + std::to_string(q.dim(2)) + " above 128");
    const int64_t rows = q.dim(0), heads = q.dim(1), d = q.dim(2);
    if (out.dtype() == DType::bf16) {
      const ops::SegmentOperands in{.q = q.data_as<const float>(), .k = k.data_as<const float>(),
                                    .v = v.data_as<const float>(), .ld = heads * d};
      ops::segment_attention_tc(in, p.d_offsets, p.num_segments(), rows, heads, d, scale,
                                segment_scratch(rows, heads, d), out.data(), ctx_.stream());
    } else {
      ops::segment_attention(q.data_as<const float>(), k.data_as<const float>(), v.data_as<const float>(), p.d_offsets,
                             p.num_segments(), rows, heads, d, scale, out.data(), out.dtype(), ctx_.stream());
    }
    after(op);
  }

  // bf16 out: one pass adds the bias, rotates q and k and packs them for the tensor-core kernel
  // (no split of the projection, no separate bias and rotary passes). The f32 reference mode
  // takes the steps one by one.
  void do_qkv_segment_attention(Tensor& qkv, const Tensor& bias, const kernels::VisionPlan& plan, float scale,
                                Tensor& scratch, Tensor& out) override {
    const char* op = "qkv_segment_attention";
    const int64_t rows = out.dim(0), heads = out.dim(1), d = out.dim(2), c = heads * d;
    if (out.dtype() != DType::bf16 || !ops::segment_attention_supported(d)) {
      kernels::Backend::do_qkv_segment_attention(qkv, bias, plan, scale, scratch, out);
      return;
    }
    const auto& p = cuda_plan(plan, op);
    const auto* x = qkv.data_as<const float>();
    const ops::SegmentOperands in{.q = x, .k = x + c, .v = x + 2 * c, .ld = 3 * c, .bias = bias.data_as<const float>(),
                                  .cos = p.d_cos, .sin = p.d_sin};
    // The packed bf16 Q, K, V fit in the caller's f32 scratch for any head size from 8 up.
    const bool fits = ops::segment_attention_tc_scratch_bytes(rows, heads, d) <= scratch.numel() * 4;
    ops::segment_attention_tc(in, p.d_offsets, p.num_segments(), rows, heads, d, scale,
                              fits ? scratch.data() : segment_scratch(rows, heads, d), out.data(), ctx_.stream());
    after(op);
  }

 private:
  void* segment_scratch(int64_t rows, int64_t heads, int64_t d) {
    return ctx_.scratch(Scratch::segment_operands,
                        static_cast<size_t>(ops::segment_attention_tc_scratch_bytes(rows, heads, d)));
  }

  static float element(const HostTensor& src, const unsigned char* bytes, int64_t i) {
    if (src.dtype == DType::f32) {
      float f;
      std::memcpy(&f, bytes + 4 * i, 4);
      return f;
    }
    uint16_t h;
    std::memcpy(&h, bytes + 2 * i, 2);  // checkpoint data need not be aligned
    return src.dtype == DType::bf16 ? ds::bf16_to_f32(h) : ds::f16_to_f32(h);
  }

  // Changes whenever memory a recording may read is reallocated: the plan's device buffer and
  // the scratch slots (the decode attention's fixed work lists are never reallocated).
  uint64_t memory_epoch() const { return uploader_.reallocations() + ctx_.scratch_reallocations(); }

  // In sync mode every op waits for the device so a fault is reported by the op that caused it.
  void after(const char* op) {
    if (!sync_) return;
    const cudaError_t e = cudaStreamSynchronize(ctx_.stream());
    if (e != cudaSuccess) throw std::runtime_error(std::string("cuda backend: ") + op + ": " + cudaGetErrorString(e));
  }

  // Where RoPE reads the step's positions: the plan's, and with M-RoPE its per-row (t, h, w)
  // and each frequency's axis (interleaved sections, backend.h), uploaded once per sections.
  ops::RopePositions rope_positions(const CudaBatchPlan& p, const RopeParams& params) {
    ops::RopePositions rp{p.d_positions};
    if (!p.d_mrope) return rp;
    const int64_t half = params.rotary_dim / 2;
    const auto key = std::make_pair(half, params.mrope_section);
    auto it = mrope_axis_.find(key);
    if (it == mrope_axis_.end()) {
      std::vector<uint8_t> axis(static_cast<size_t>(half), 0);
      for (int64_t i = 0; i < half; ++i) {
        if (i % 3 == 1 && i < 3 * params.mrope_section[1]) axis[static_cast<size_t>(i)] = 1;
        if (i % 3 == 2 && i < 3 * params.mrope_section[2]) axis[static_cast<size_t>(i)] = 2;
      }
      auto* d = static_cast<uint8_t*>(ctx_.malloc_device(axis.size(), "the M-RoPE axis table"));
      std::shared_ptr<void> keep(d, [](void* q) { cudaFree(q); });
      ops::check_cuda(cudaMemcpy(d, axis.data(), axis.size(), cudaMemcpyHostToDevice), "M-RoPE axis table");
      it = mrope_axis_.emplace(key, std::move(keep)).first;
    }
    rp.mrope = p.d_mrope;
    rp.axis = static_cast<const uint8_t*>(it->second.get());
    return rp;
  }

  // The RoPE frequencies (kernels::rope_frequencies, the CPU backend's), uploaded once per
  // table: a recorded step keeps pointing at the same upload.
  const float* inv_freq(const RopeParams& params) {
    std::vector<float> f = rope_frequencies(params);
    auto it = inv_freq_.find(f);
    if (it != inv_freq_.end()) return it->second.data_as<const float>();
    Tensor t = alloc(DType::f32, Shape{static_cast<int64_t>(f.size())});
    copy_from_host(f, t);
    return inv_freq_.emplace(std::move(f), t).first->second.data_as<const float>();
  }

  CudaBackendOptions options_;
  CudaContext ctx_;
  PlanUploader uploader_;
  AttentionRunner attention_;
  CudaTransfers transfers_;
  bool sync_;
  uint64_t generation_ = 0;
  std::map<std::vector<float>, Tensor> inv_freq_;
  std::map<std::pair<int64_t, std::array<int64_t, 3>>, std::shared_ptr<void>> mrope_axis_;
};

}  // namespace

std::unique_ptr<kernels::Backend> make_cuda_backend(const CudaBackendOptions& options) {
  const DType t = options.kv_dtype;
  if (t != DType::bf16 && t != DType::f16 && t != DType::q8_0 && t != DType::q4_0)
    throw std::invalid_argument("cuda backend: K/V cache type " + std::string(dtype_name(t)) +
                                " (supported: bf16, f16, q8_0, q4_0)");
  const DType s = options.recurrent_state_dtype;
  if (s != DType::f32 && s != DType::bf16)
    throw std::invalid_argument("cuda backend: recurrent state type " + std::string(dtype_name(s)) +
                                " (supported: f32, bf16)");
  return std::make_unique<CudaBackend>(options);
}

bool cuda_device_available() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) cudaGetLastError();
  return e == cudaSuccess && count > 0;
}

void* backend_stream(kernels::Backend& backend) {
  auto* b = dynamic_cast<CudaBackend*>(&backend);
  if (!b) throw std::invalid_argument("backend_stream: '" + std::string(backend.name()) + "' is not the cuda backend");
  return b->stream();
}

}  // namespace ds::cuda
