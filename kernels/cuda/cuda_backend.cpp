// CudaBackend: device memory, weight upload, the step plan, and each op's checks and launch.
#include "kernels/cuda/cuda_backend.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernels/common/half.h"
#include "kernels/cuda/backend_ops.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_backend_parts.h"
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cuda_plan.h"

namespace ds::cuda {
namespace {

using kernels::BatchPlan;
using kernels::DeltaNetDims;
using kernels::HostTensor;
using kernels::RopeParams;
using kernels::Shape;
using kernels::Tensor;

[[noreturn]] void fail(const char* op, const std::string& what) {
  throw std::invalid_argument(std::string(op) + ": " + what);
}
// The message is built only on failure: these checks run on every op of every step.
// (Wrap a condition holding braces, e.g. Shape{a, b}, in parentheses.)
#define CHECK_ARG(ok, op, ...) \
  do {                         \
    if (!(ok)) fail(op, __VA_ARGS__); \
  } while (0)

void check_type(const Tensor& t, const char* op, const char* name, DType want) {
  CHECK_ARG(!t.empty(), op, std::string(name) + " is empty");
  CHECK_ARG(t.dtype() == want, op,
        std::string(name) + " must be " + std::string(dtype_name(want)) + ", not " + std::string(dtype_name(t.dtype())));
}

void check_act(const Tensor& t, const char* op, const char* name) {
  CHECK_ARG(!t.empty(), op, std::string(name) + " is empty");
  CHECK_ARG(t.dtype() == DType::f32 || t.dtype() == DType::bf16, op, std::string(name) + " must be f32 or bf16");
}

const CudaBatchPlan& cuda_plan(const BatchPlan& plan, const char* op) {
  const auto* p = dynamic_cast<const CudaBatchPlan*>(&plan);
  CHECK_ARG(p != nullptr, op, "the plan was not made by this backend");
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
        sync_(o.sync_each_op || env_sync()) {}

  ~CudaBackend() override { cudaStreamSynchronize(ctx_.stream()); }

  std::string_view name() const override { return "cuda"; }
  DType kv_cache_dtype() const override { return options_.kv_dtype; }
  DType activation_dtype() const override { return options_.f32_weights ? DType::f32 : DType::bf16; }

  DeviceMemory device_memory() const override {
    size_t free_b = 0, total_b = 0;
    ops::check_cuda(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
    return {static_cast<int64_t>(free_b), static_cast<int64_t>(total_b)};
  }

  void synchronize() override { ops::check_cuda(cudaStreamSynchronize(ctx_.stream()), "synchronize (an op failed)"); }

  void* stream() { return ctx_.stream(); }

  void set_profiling(bool on) { profile_ = on; }
  std::string profile_report() {
    synchronize();
    for (const Timing& t : timing_) {
      free_events_.push_back(t.start);
      free_events_.push_back(t.end);
      if (!t.ended) continue;  // the op threw
      float ms = 0;
      ops::check_cuda(cudaEventElapsedTime(&ms, t.start, t.end), "profile: elapsed");
      auto& [total, count] = totals_[t.name];
      total += ms;
      ++count;
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

  // ---- memory

  Tensor alloc(DType dtype, const Shape& shape) override {
    const int64_t bytes = ds::row_bytes(dtype, shape.numel());
    void* p = ctx_.malloc_device(static_cast<size_t>(bytes), "a " + std::string(dtype_name(dtype)) + " tensor " + shape.str());
    return Tensor(std::shared_ptr<void>(p, [](void* q) { cudaFree(q); }), p, dtype, shape);
  }

  Tensor upload(const HostTensor& src) override {
    CHECK_ARG(src.dtype == DType::f32 || src.dtype == DType::bf16 || src.dtype == DType::f16, "upload",
          "cannot load " + std::string(dtype_name(src.dtype)) + " weights");
    const int64_t n = src.shape.numel();
    const auto* bytes = static_cast<const unsigned char*>(src.data);
    // Matrices are GEMM operands (and the embedding table): bf16. Vectors and conv filters: f32.
    const bool matrix = src.shape.rank() == 2 && !options_.f32_weights;
    Tensor t = alloc(matrix ? DType::bf16 : DType::f32, src.shape);
    if (n == 0) return t;
    auto s = ctx_.stream();
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

  void fill_zero(Tensor& t) override {
    begin("fill_zero");
    CHECK_ARG(!t.empty() || t.numel() == 0, "fill_zero", "empty tensor");
    if (t.numel() > 0)
      ops::check_cuda(cudaMemsetAsync(t.data(), 0, static_cast<size_t>(t.bytes()), ctx_.stream()), "fill_zero");
    after("fill_zero");
  }

  void copy(const Tensor& src, Tensor& dst) override {
    begin("copy");
    CHECK_ARG(src.dtype() == dst.dtype() && src.numel() == dst.numel(), "copy",
              "src " + src.shape().str() + " and dst " + dst.shape().str() + " differ");
    if (src.numel() > 0)
      ops::check_cuda(cudaMemcpyAsync(dst.data(), src.data(), static_cast<size_t>(src.bytes()),
                                      cudaMemcpyDeviceToDevice, ctx_.stream()),
                      "copy");
    after("copy");
  }

  void copy_to_host(const Tensor& src, std::span<float> dst) override {
    check_act(src, "copy_to_host", "src");
    CHECK_ARG(static_cast<int64_t>(dst.size()) == src.numel(), "copy_to_host",
          "destination holds " + std::to_string(dst.size()) + " floats, tensor " + src.shape().str());
    if (dst.empty()) return;
    auto s = ctx_.stream();
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

  void copy_from_host(std::span<const float> src, Tensor& dst) override {
    check_act(dst, "copy_from_host", "dst");
    CHECK_ARG(static_cast<int64_t>(src.size()) == dst.numel(), "copy_from_host",
          "source holds " + std::to_string(src.size()) + " floats, tensor " + dst.shape().str());
    if (src.empty()) return;
    auto s = ctx_.stream();
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

  std::unique_ptr<BatchPlan> plan(const kernels::BatchDesc& desc) override {
    auto p = std::make_unique<CudaBatchPlan>(desc, uploader_, ctx_.stream(), ++generation_);
    after("plan");
    return p;
  }

  // ---- ops

  void embedding(const Tensor& table, const BatchPlan& plan, Tensor& out) override {
    const char* op = "embedding";
    begin(op);
    const auto& p = cuda_plan(plan, op);
    check_act(table, op, "table");
    check_type(out, op, "out", DType::f32);
    CHECK_ARG(table.rank() == 2, op, "table must be [V, H]");
    CHECK_ARG((out.shape() == Shape{p.num_rows(), table.dim(1)}), op,
          "out must be " + Shape{p.num_rows(), table.dim(1)}.str() + ", got " + out.shape().str());
    ops::embedding(table.data(), table.dtype(), p.d_token_ids, p.num_rows(), table.dim(1), out.data_as<float>(),
                   ctx_.stream());
    after(op);
  }

  void gather_rows(const Tensor& x, const BatchPlan& plan, Tensor& out) override {
    const char* op = "gather_rows";
    begin(op);
    const auto& p = cuda_plan(plan, op);
    check_type(x, op, "x", DType::f32);
    check_type(out, op, "out", DType::f32);
    CHECK_ARG(x.rank() == 2 && x.dim(0) == p.num_rows(), op, "x must be [rows, H], got " + x.shape().str());
    const auto n = static_cast<int64_t>(p.logit_rows().size());
    CHECK_ARG((out.shape() == Shape{n, x.dim(1)}), op, "out must be " + Shape{n, x.dim(1)}.str() + ", got " + out.shape().str());
    ops::gather_rows(x.data_as<const float>(), p.d_logit_rows, n, x.dim(1), out.data_as<float>(), ctx_.stream());
    after(op);
  }

  void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) override {
    const char* op = "rms_norm";
    begin(op);
    check_act(x, op, "x");
    check_act(out, op, "out");
    check_type(weight, op, "weight", DType::f32);
    const int64_t d = weight.numel();
    CHECK_ARG(d > 0 && x.rank() >= 1 && x.dim(x.rank() - 1) == d, op,
          "x " + x.shape().str() + " must end in the weight's " + std::to_string(d) + " elements");
    CHECK_ARG(out.shape() == x.shape(), op, "out " + out.shape().str() + " must match x " + x.shape().str());
    CHECK_ARG(out.data() != x.data() || out.dtype() == x.dtype(), op, "in place needs one element type");
    ops::rms_norm(x.data(), x.dtype(), weight.data_as<const float>(), x.numel() / d, d, eps, out.data(), out.dtype(),
                  ctx_.stream());
    after(op);
  }

  void gemm(const Tensor& x, const Tensor& w, Tensor& out, bool accumulate) override {
    const char* op = profile_ ? gemm_name(w) : "gemm";
    begin(op);
    run_gemm(ctx_, options_.paths, x, w, out, accumulate);
    after(op);
  }

  void swiglu(const Tensor& gate_up, Tensor& out) override {
    const char* op = "swiglu";
    begin(op);
    check_type(gate_up, op, "gate_up", DType::f32);
    check_act(out, op, "out");
    CHECK_ARG(gate_up.rank() == 2 && gate_up.dim(1) % 2 == 0, op, "gate_up must be [M, 2I], got " + gate_up.shape().str());
    const int64_t m = gate_up.dim(0), inter = gate_up.dim(1) / 2;
    CHECK_ARG((out.shape() == Shape{m, inter}), op, "out must be " + Shape{m, inter}.str() + ", got " + out.shape().str());
    ops::swiglu(gate_up.data_as<const float>(), m, inter, out.data(), out.dtype(), ctx_.stream());
    after(op);
  }

  // One row (batch-1 decode): the gate and up rows in one weight-streaming kernel that writes
  // the SwiGLU product; otherwise the GEMM and the elementwise kernel.
  void gate_up_swiglu(const Tensor& x, const Tensor& w, Tensor& scratch, Tensor& out) override {
    const bool one_row = x.rank() == 2 && x.dim(0) == 1 && x.dtype() == DType::bf16 && w.dtype() == DType::bf16 &&
                         w.rank() == 2 && w.dim(0) % 2 == 0 && w.dim(1) == x.dim(1) && options_.paths.gemv &&
                         ops::gemv_supported(1, x.dim(1));
    if (!one_row) {
      kernels::Backend::gate_up_swiglu(x, w, scratch, out);
      return;
    }
    const char* op = "gate_up_swiglu";
    begin(op);
    check_act(out, op, "out");
    const int64_t inter = w.dim(0) / 2;
    CHECK_ARG((out.shape() == Shape{1, inter}), op, "out must be " + Shape{1, inter}.str() + ", got " + out.shape().str());
    ops::gemv_swiglu_bf16(w.data_as<const uint16_t>(), x.data_as<const uint16_t>(), inter, x.dim(1), out.data(),
                          out.dtype(), ctx_.stream());
    after(op);
  }

  void split_query_gate(const Tensor& qg, Tensor& q, Tensor& gate) override {
    const char* op = "split_query_gate";
    begin(op);
    check_type(qg, op, "qg", DType::f32);
    check_type(q, op, "q", DType::f32);
    check_type(gate, op, "gate", DType::f32);
    CHECK_ARG(qg.rank() == 3 && qg.dim(2) % 2 == 0, op, "qg must be [M, Nq, 2D], got " + qg.shape().str());
    const Shape want{qg.dim(0), qg.dim(1), qg.dim(2) / 2};
    CHECK_ARG(q.shape() == want && gate.shape() == want, op, "q and gate must be " + want.str());
    ops::split_query_gate(qg.data_as<const float>(), qg.dim(0) * qg.dim(1), want[2], q.data_as<float>(),
                          gate.data_as<float>(), ctx_.stream());
    after(op);
  }

  void prepare_qk(const Tensor& qg, const Tensor& q_norm, const Tensor& k_norm, float eps, const BatchPlan& plan,
                  const RopeParams& params, Tensor& q, Tensor& gate, Tensor& k) override {
    const char* op = "prepare_qk";
    CHECK_ARG(qg.rank() == 3 && qg.dim(2) % 2 == 0, op, "qg must be [M, Nq, 2D], got " + qg.shape().str());
    const int64_t rows = qg.dim(0), nq = qg.dim(1), d = qg.dim(2) / 2;
    if (!ops::qk_norm_rope_supported(d)) {  // head dims the one-block-per-head kernel does not take
      kernels::Backend::prepare_qk(qg, q_norm, k_norm, eps, plan, params, q, gate, k);
      return;
    }
    begin(op);
    const auto& p = cuda_plan(plan, op);
    check_type(qg, op, "qg", DType::f32);
    check_type(q, op, "q", DType::f32);
    check_type(gate, op, "gate", DType::f32);
    check_type(k, op, "k", DType::f32);
    check_type(q_norm, op, "q_norm", DType::f32);
    check_type(k_norm, op, "k_norm", DType::f32);
    CHECK_ARG(rows == p.num_rows(), op, "qg must have one row per step row, got " + qg.shape().str());
    const Shape want{rows, nq, d};
    CHECK_ARG(q.shape() == want && gate.shape() == want, op, "q and gate must be " + want.str());
    CHECK_ARG(k.rank() == 3 && k.dim(0) == rows && k.dim(2) == d, op,
              "k must be [" + std::to_string(rows) + ", Nkv, " + std::to_string(d) + "], got " + k.shape().str());
    CHECK_ARG(q_norm.numel() == d && k_norm.numel() == d, op, "q_norm and k_norm must hold " + std::to_string(d) + " values");
    const int64_t r = params.rotary_dim;
    CHECK_ARG(r > 0 && r % 2 == 0 && r <= d, op,
              "rotary dim " + std::to_string(r) + " must be even and within head dim " + std::to_string(d));
    CHECK_ARG(params.theta > 0, op, "theta must be positive");
    ops::qk_norm_rope(qg.data_as<const float>(), q.data_as<float>(), gate.data_as<float>(), k.data_as<float>(),
                      q_norm.data_as<const float>(), k_norm.data_as<const float>(), p.d_positions, rows, nq, k.dim(1), d,
                      eps, r, inv_freq(r, params.theta), ctx_.stream());
    after(op);
  }

  static_assert(ops::kMaxSplitParts == kernels::Backend::kMaxSplitParts);
  void split_columns(const Tensor& x, std::span<Tensor> parts) override {
    const char* op = "split_columns";
    begin(op);
    check_type(x, op, "x", DType::f32);
    CHECK_ARG(x.rank() == 2, op, "x must be [M, N], got " + x.shape().str());
    CHECK_ARG(!parts.empty() && parts.size() <= static_cast<size_t>(ops::kMaxSplitParts), op,
              "between 1 and " + std::to_string(ops::kMaxSplitParts) + " parts, got " + std::to_string(parts.size()));
    const int64_t m = x.dim(0);
    ops::SplitParts sp{};
    sp.count = static_cast<int>(parts.size());
    for (size_t i = 0; i < parts.size(); ++i) {
      check_type(parts[i], op, "part", DType::f32);
      CHECK_ARG(parts[i].rank() >= 1 && parts[i].dim(0) == m, op,
                "each part must have " + std::to_string(m) + " rows, got " + parts[i].shape().str());
      sp.dst[i] = parts[i].data_as<float>();
      sp.first[i + 1] = sp.first[i] + (m > 0 ? parts[i].numel() / m : 0);
    }
    CHECK_ARG(sp.first[sp.count] == x.dim(1), op,
              "the parts hold " + std::to_string(sp.first[sp.count]) + " columns, x has " + std::to_string(x.dim(1)));
    ops::split_columns(x.data_as<const float>(), m, x.dim(1), sp, ctx_.stream());
    after(op);
  }

  // Decode-sized steps fuse (a step's DeltaNet a/b projections are 32-row GEMMs that cost
  // their launch latency; see docs/benchmarks.md).
  int64_t fused_projection_rows() const override { return options_.paths.fused_projection_rows; }

  void rope(Tensor& x, const BatchPlan& plan, const RopeParams& params) override {
    const char* op = "rope";
    begin(op);
    const auto& p = cuda_plan(plan, op);
    check_type(x, op, "x", DType::f32);
    CHECK_ARG(x.rank() == 3 && x.dim(0) == p.num_rows(), op, "x must be [rows, heads, D], got " + x.shape().str());
    const int64_t d = x.dim(2), r = params.rotary_dim;
    CHECK_ARG(r > 0 && r % 2 == 0 && r <= d, op,
          "rotary dim " + std::to_string(r) + " must be even and within head dim " + std::to_string(d));
    CHECK_ARG(params.theta > 0, op, "theta must be positive");
    ops::rope(x.data_as<float>(), p.d_positions, x.dim(0), x.dim(1), d, r, inv_freq(r, params.theta), ctx_.stream());
    after(op);
  }

  void sigmoid_gate(Tensor& x, const Tensor& gate) override {
    const char* op = "sigmoid_gate";
    begin(op);
    check_act(x, op, "x");
    check_type(gate, op, "gate", DType::f32);
    CHECK_ARG(x.shape() == gate.shape(), op, "x " + x.shape().str() + " and gate " + gate.shape().str() + " differ");
    ops::sigmoid_gate(x.data(), x.dtype(), gate.data_as<const float>(), x.numel(), ctx_.stream());
    after(op);
  }

  void kv_write(const Tensor& k, const Tensor& v, const BatchPlan& plan, Tensor& k_pool, Tensor& v_pool) override {
    const char* op = "kv_write";
    begin(op);
    const auto& p = cuda_plan(plan, op);
    check_type(k, op, "k", DType::f32);
    check_type(v, op, "v", DType::f32);
    check_type(k_pool, op, "k_pool", options_.kv_dtype);
    check_type(v_pool, op, "v_pool", options_.kv_dtype);
    CHECK_ARG(k.rank() == 3 && k.dim(0) == p.num_rows() && v.shape() == k.shape(), op,
          "k and v must be one [rows, Nkv, D] shape, got " + k.shape().str() + ", " + v.shape().str());
    CHECK_ARG(k_pool.rank() == 4 && v_pool.shape() == k_pool.shape() && k_pool.dim(2) == k.dim(1) &&
              k_pool.dim(3) == k.dim(2),
          op, "pools must be [blocks, block_size, " + std::to_string(k.dim(1)) + ", " + std::to_string(k.dim(2)) + "]");
    CHECK_ARG(k_pool.dim(1) == p.block_size(), op, "pool block size differs from the batch's");
    CHECK_ARG(p.max_block_id < k_pool.dim(0), op, "block id outside the pool");
    CHECK_ARG(!is_quantized(options_.kv_dtype) || k.dim(2) % 32 == 0, op,
              "a " + std::string(dtype_name(options_.kv_dtype)) + " K/V cache needs a head dim that is a multiple of 32");
    KvPoolView pools{k_pool.data(), v_pool.data(), options_.kv_dtype, options_.kv_dtype, k_pool.dim(0),
                     static_cast<int32_t>(k_pool.dim(1)), static_cast<int32_t>(k.dim(1)), static_cast<int32_t>(k.dim(2))};
    KvWrite w{k.data(), v.data(), DType::f32, static_cast<int32_t>(p.num_rows()), p.d_kv_slots, ctx_.stream().chained};
    write_kv(pools, w, false, nullptr, ctx_.stream());
    after(op);
  }

  void paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool, const BatchPlan& plan, float scale,
                       Tensor& out) override {
    const auto& p = cuda_plan(plan, "paged_attention");
    const char* op = p.prefill_seqs.empty() ? "paged_attention(decode)" : "paged_attention(with prefill)";
    begin(op);
    CHECK_ARG(!k_pool.empty() && p.max_block_id < k_pool.dim(0), op, "block id outside the pool");
    attention_.run(q, k_pool, v_pool, p, scale, out);
    after(op);
  }

  void causal_conv1d(const Tensor& x, const Tensor& weight, Tensor& conv_state, int64_t layer, const BatchPlan& plan,
                     Tensor& out) override {
    const char* op = "causal_conv1d";
    begin(op);
    const auto& p = cuda_plan(plan, op);
    check_type(x, op, "x", DType::f32);
    check_type(weight, op, "weight", DType::f32);
    check_type(conv_state, op, "conv_state", DType::f32);
    check_type(out, op, "out", DType::f32);
    CHECK_ARG(x.rank() == 2 && x.dim(0) == p.num_rows(), op, "x must be [rows, C], got " + x.shape().str());
    CHECK_ARG(out.shape() == x.shape(), op, "out " + out.shape().str() + " must match x " + x.shape().str());
    const int64_t ch = x.dim(1);
    CHECK_ARG(weight.rank() == 3 && weight.dim(0) == ch && weight.dim(1) == 1 && weight.dim(2) >= 2, op,
          "weight must be [C, 1, Kc] with C = " + std::to_string(ch) + ", got " + weight.shape().str());
    const int64_t kc = weight.dim(2);
    CHECK_ARG(conv_state.rank() == 4 && conv_state.dim(2) == ch && conv_state.dim(3) == kc - 1, op,
          "conv_state must be [slots, layers, C, Kc-1], got " + conv_state.shape().str());
    CHECK_ARG(layer >= 0 && layer < conv_state.dim(1), op, "layer " + std::to_string(layer) + " outside the state");
    for (const auto& s : p.seqs()) CHECK_ARG(s.state_slot < conv_state.dim(0), op, "state slot outside the state");
    // Short sequences token by token; prefill chunks (the DeltaNet chunk list) in parallel.
    ops::causal_conv1d(x.data_as<const float>(), weight.data_as<const float>(), conv_state.data_as<float>(),
                       conv_state.dim(1), layer, p.d_seqs, p.d_rec_seq_ids, p.n_rec, ch, static_cast<int32_t>(kc),
                       out.data_as<float>(), ctx_.stream());
    CHECK_ARG(p.n_chunk_items == 0 || kc - 1 <= ops::kGdnRecurrentMaxTokens, op, "kernel size too large");
    ops::causal_conv1d_chunks(x.data_as<const float>(), weight.data_as<const float>(), conv_state.data_as<float>(),
                              conv_state.dim(1), layer, p.d_seqs, p.d_chunk_items, p.n_chunk_items, p.d_chunk_seqs,
                              p.n_chunk_seqs, ch, static_cast<int32_t>(kc), out.data_as<float>(), ctx_.stream());
    after(op);
  }

  void gated_delta_rule(const Tensor& qkv, const Tensor& a, const Tensor& b, const Tensor& a_log, const Tensor& dt_bias,
                        Tensor& recurrent_state, int64_t layer, const BatchPlan& plan, const DeltaNetDims& dims,
                        Tensor& out) override {
    const auto& p = cuda_plan(plan, "gated_delta_rule");
    const char* op = p.n_chunk_items == 0 ? "gated_delta_rule(recurrent)" : "gated_delta_rule(with chunks)";
    begin(op);
    const std::pair<const Tensor*, const char*> operands[] = {
        {&qkv, "qkv"}, {&a, "a"}, {&b, "b"}, {&a_log, "a_log"}, {&dt_bias, "dt_bias"},
        {&recurrent_state, "recurrent_state"}, {&out, "out"}};
    for (const auto& [t, name] : operands) check_type(*t, op, name, DType::f32);
    const int64_t hk = dims.k_heads, hv = dims.v_heads, dk = dims.k_dim, dv = dims.v_dim;
    CHECK_ARG(hk > 0 && hv > 0 && dk > 0 && dv > 0 && hv % hk == 0, op, "value heads must be a positive multiple of key heads");
    const int64_t rows = p.num_rows();
    CHECK_ARG((qkv.shape() == Shape{rows, dims.conv_dim()}), op, "qkv must be " + Shape{rows, dims.conv_dim()}.str());
    CHECK_ARG((a.shape() == Shape{rows, hv} && b.shape() == Shape{rows, hv}), op, "a and b must be " + Shape{rows, hv}.str());
    CHECK_ARG(a_log.numel() == hv && dt_bias.numel() == hv, op, "A_log and dt_bias must have Hv elements");
    CHECK_ARG((out.shape() == Shape{rows, hv, dv}), op, "out must be " + Shape{rows, hv, dv}.str());
    CHECK_ARG(recurrent_state.rank() == 5 && recurrent_state.dim(2) == hv && recurrent_state.dim(3) == dk &&
              recurrent_state.dim(4) == dv,
          op, "recurrent_state must be [slots, layers, Hv, dk, dv], got " + recurrent_state.shape().str());
    CHECK_ARG(layer >= 0 && layer < recurrent_state.dim(1), op, "layer outside the state");
    for (const auto& s : p.seqs()) CHECK_ARG(s.state_slot < recurrent_state.dim(0), op, "state slot outside the state");
    ops::GdnArgs g{};
    g.qkv = qkv.data_as<const float>();
    g.a = a.data_as<const float>();
    g.b = b.data_as<const float>();
    g.a_log = a_log.data_as<const float>();
    g.dt_bias = dt_bias.data_as<const float>();
    g.state = recurrent_state.data_as<float>();
    g.out = out.data_as<float>();
    g.n_layers = recurrent_state.dim(1);
    g.layer = layer;
    g.k_heads = static_cast<int32_t>(hk);
    g.v_heads = static_cast<int32_t>(hv);
    g.k_dim = static_cast<int32_t>(dk);
    g.v_dim = static_cast<int32_t>(dv);
    g.seqs = p.d_seqs;
    ops::gdn_recurrent(g, p.d_rec_seq_ids, p.n_rec, ctx_.stream());
    if (p.n_chunk_items > 0) {
      const auto bytes = static_cast<size_t>(int64_t{p.n_chunk_items} * hv * ops::kGdnScratchFloats * 4);
      auto* scratch = static_cast<float*>(ctx_.scratch(Scratch::gdn_chunks, bytes));
      ops::gdn_chunked(g, p.d_chunk_items, p.n_chunk_items, p.d_chunk_seqs, p.n_chunk_seqs, scratch, ctx_.stream());
    }
    after(op);
  }

  void gated_rms_norm(const Tensor& x, const Tensor& z, const Tensor& weight, float eps, Tensor& out) override {
    const char* op = "gated_rms_norm";
    begin(op);
    check_type(x, op, "x", DType::f32);
    check_type(z, op, "z", DType::f32);
    check_type(weight, op, "weight", DType::f32);
    check_act(out, op, "out");
    const int64_t d = weight.numel();
    CHECK_ARG(d > 0 && x.rank() >= 1 && x.dim(x.rank() - 1) == d, op,
          "x " + x.shape().str() + " must end in the weight's " + std::to_string(d) + " elements");
    CHECK_ARG(z.shape() == x.shape() && out.shape() == x.shape(), op, "x, z and out must have one shape");
    CHECK_ARG(out.data() != x.data() || out.dtype() == DType::f32, op, "in place needs an f32 out");
    ops::gated_rms_norm(x.data_as<const float>(), z.data_as<const float>(), weight.data_as<const float>(),
                        x.numel() / d, d, eps, out.data(), out.dtype(), ctx_.stream());
    after(op);
  }

 private:
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

  // Profiling: an event pair around each op, resolved when the report is taken.
  void begin(const char* op) {
    if (!profile_) return;
    timing_.push_back({op, event(), event(), false});
    ops::check_cuda(cudaEventRecord(timing_.back().start, ctx_.stream()), "profile");
  }
  cudaEvent_t event() {
    if (free_events_.empty()) {
      cudaEvent_t e;
      ops::check_cuda(cudaEventCreate(&e), "profile: cudaEventCreate");
      return e;
    }
    cudaEvent_t e = free_events_.back();
    free_events_.pop_back();
    return e;
  }
  const char* gemm_name(const Tensor& w) {
    auto it = gemm_names_.find(w.dim(0));
    if (it == gemm_names_.end())
      it = gemm_names_.emplace(w.dim(0), "gemm N=" + std::to_string(w.dim(0))).first;
    return it->second.c_str();
  }

  // In sync mode every op waits for the device so a fault is reported by the op that caused it.
  void after(const char* op) {
    if (profile_ && !timing_.empty() && !timing_.back().ended && std::strcmp(timing_.back().name, op) == 0) {
      ops::check_cuda(cudaEventRecord(timing_.back().end, ctx_.stream()), "profile");
      timing_.back().ended = true;
    }
    if (!sync_) return;
    const cudaError_t e = cudaStreamSynchronize(ctx_.stream());
    if (e != cudaSuccess) throw std::runtime_error(std::string("cuda backend: ") + op + ": " + cudaGetErrorString(e));
  }

  // The RoPE frequencies in the CPU backend's f32 recipe, uploaded once per (R, theta).
  const float* inv_freq(int64_t r, double theta) {
    const auto key = std::make_pair(r, theta);
    auto it = inv_freq_.find(key);
    if (it != inv_freq_.end()) return it->second.data_as<const float>();
    const int64_t half = r / 2;
    std::vector<float> f(static_cast<size_t>(half));
    const float th = static_cast<float>(theta);
    for (int64_t i = 0; i < half; ++i) {
      const float e = static_cast<float>(2 * i) / static_cast<float>(r);
      f[static_cast<size_t>(i)] = 1.0f / static_cast<float>(std::pow(static_cast<double>(th), static_cast<double>(e)));
    }
    Tensor t = alloc(DType::f32, Shape{half});
    copy_from_host(f, t);
    return inv_freq_.emplace(key, t).first->second.data_as<const float>();
  }

  CudaBackendOptions options_;
  CudaContext ctx_;
  PlanUploader uploader_;
  AttentionRunner attention_;
  bool sync_;
  uint64_t generation_ = 0;
  std::map<std::pair<int64_t, double>, Tensor> inv_freq_;
  struct Timing {
    const char* name;
    cudaEvent_t start, end;
    bool ended;
  };
  bool profile_ = false;
  std::vector<Timing> timing_;
  std::vector<cudaEvent_t> free_events_;
  std::map<std::string, std::pair<double, int64_t>> totals_;
  std::map<int64_t, std::string> gemm_names_;
};

}  // namespace

std::unique_ptr<kernels::Backend> make_cuda_backend(const CudaBackendOptions& options) {
  const DType t = options.kv_dtype;
  if (t != DType::bf16 && t != DType::f16 && t != DType::q8_0 && t != DType::q4_0)
    throw std::invalid_argument("cuda backend: K/V cache type " + std::string(dtype_name(t)) +
                                " (supported: bf16, f16, q8_0, q4_0)");
  return std::make_unique<CudaBackend>(options);
}

bool cuda_device_available() {
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) cudaGetLastError();
  return e == cudaSuccess && count > 0;
}

void set_profiling(kernels::Backend& backend, bool on) {
  auto* b = dynamic_cast<CudaBackend*>(&backend);
  if (!b) throw std::invalid_argument("set_profiling: not the cuda backend");
  b->set_profiling(on);
}

std::string profile_report(kernels::Backend& backend) {
  auto* b = dynamic_cast<CudaBackend*>(&backend);
  if (!b) throw std::invalid_argument("profile_report: not the cuda backend");
  return b->profile_report();
}

void* backend_stream(kernels::Backend& backend) {
  auto* b = dynamic_cast<CudaBackend*>(&backend);
  if (!b) throw std::invalid_argument("backend_stream: '" + std::string(backend.name()) + "' is not the cuda backend");
  return b->stream();
}

}  // namespace ds::cuda
