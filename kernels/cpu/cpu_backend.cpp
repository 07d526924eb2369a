// CpuBackend: host memory, f32 everywhere, and the kernels of this folder.
#include "kernels/cpu/cpu_backend.h"

#include <cblas.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>

#include "kernels/common/half.h"
#include "kernels/int4.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/thread_pool.h"

namespace ds::kernels::cpu {

namespace {

constexpr size_t kAlign = 64;
// Allocations from this size on are anonymous mappings, and zeroing their whole pages hands
// the pages back: the K/V and state pools then cost memory only as sequences touch them, so a
// generous default cache neither slows start-up nor shows as idle resident memory.
constexpr size_t kMappedFrom = size_t{1} << 20;

size_t page_size() {
  static const size_t p = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return p;
}

// The live anonymous mappings, so fill_zero drops pages only where that reads back as zeros.
struct Mappings {
  std::mutex mu;
  std::map<uintptr_t, size_t> spans;  // begin -> bytes

  void add(void* p, size_t bytes) {
    std::lock_guard lock(mu);
    spans.emplace(reinterpret_cast<uintptr_t>(p), bytes);
  }
  void remove(void* p) {
    std::lock_guard lock(mu);
    spans.erase(reinterpret_cast<uintptr_t>(p));
  }
  bool contains(const void* p, size_t bytes) {
    const auto b = reinterpret_cast<uintptr_t>(p);
    std::lock_guard lock(mu);
    auto it = spans.upper_bound(b);
    if (it == spans.begin()) return false;
    --it;
    return b >= it->first && b + bytes <= it->first + it->second;
  }
};
Mappings& mappings() {
  static Mappings m;
  return m;
}

// Zeroes [p, p + bytes): whole pages by dropping them (they read back as zeros), the ragged
// ends by memset. Only for memory of private anonymous mappings.
void zero_mapped(void* p, size_t bytes) {
  auto* b = static_cast<unsigned char*>(p);
  const auto lo = (reinterpret_cast<uintptr_t>(b) + page_size() - 1) / page_size() * page_size();
  const auto hi = (reinterpret_cast<uintptr_t>(b) + bytes) / page_size() * page_size();
  if (hi <= lo || ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED) != 0) {
    std::memset(b, 0, bytes);
    return;
  }
  std::memset(b, 0, lo - reinterpret_cast<uintptr_t>(b));
  std::memset(reinterpret_cast<void*>(hi), 0, reinterpret_cast<uintptr_t>(b) + bytes - hi);
}

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const CpuBackendOptions& options)
      : pool_(options.num_threads),
        fused_projection_rows_(options.fused_projection_rows),
        recurrent_state_dtype_(options.recurrent_state_dtype),
        int4_weights_(options.int4_weights) {
    // GEMMs are split over our own pool (gemm.cpp); OpenBLAS's threads would only compete.
    openblas_set_num_threads(1);
  }

  std::string_view name() const override { return "cpu"; }
  DType kv_cache_dtype() const override { return DType::f32; }
  DType recurrent_state_dtype() const override { return recurrent_state_dtype_; }
  bool int4_weights() const override { return int4_weights_; }

  Tensor alloc(DType dtype, const Shape& shape) override {
    DS_CHECK(!is_quantized(dtype), "alloc", "the cpu backend stores no quantised tensors");
    const size_t bytes = static_cast<size_t>(ds::row_bytes(dtype, shape.numel()));
    const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign + kAlign;
    if (rounded >= kMappedFrom) {
      void* p = ::mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
      mappings().add(p, rounded);
      auto unmap = [rounded](void* q) {
        mappings().remove(q);
        ::munmap(q, rounded);
      };
      return Tensor(std::shared_ptr<void>(p, unmap), p, dtype, shape);
    }
    void* p = std::aligned_alloc(kAlign, rounded);
    if (!p) throw std::bad_alloc();
    return Tensor(std::shared_ptr<void>(p, std::free), p, dtype, shape);
  }

  Tensor upload(const HostTensor& src) override {
    Tensor t = alloc(DType::f32, src.shape);
    float* dst = t.data_as<float>();
    const int64_t n = src.shape.numel();
    const auto* bytes = static_cast<const unsigned char*>(src.data);
    switch (src.dtype) {
      case DType::f32:
        std::memcpy(dst, bytes, static_cast<size_t>(n) * 4);
        break;
      case DType::bf16:
      case DType::f16:
        for (int64_t i = 0; i < n; ++i) {
          uint16_t h;
          std::memcpy(&h, bytes + 2 * i, 2);  // checkpoint data need not be aligned
          dst[i] = src.dtype == DType::bf16 ? bf16_to_f32(h) : f16_to_f32(h);
        }
        break;
      case DType::int4:
        DS_CHECK(int4_weights_ && src.shape.rank() == 2 && src.int4.scales && src.int4.zeros && src.int4.group_size > 0,
                 "upload", "int4 weights need a 2-D shape with groups and the int4_weights option");
        dequantize_int4_rows(src, 0, src.shape[0], dst);
        break;
      default:
        DS_CHECK(false, "upload", "cannot load " + std::string(dtype_name(src.dtype)) + " weights");
    }
    return t;
  }

  void do_fill_zero(Tensor& t) override {
    if (t.numel() == 0) return;
    const size_t bytes = static_cast<size_t>(t.bytes());
    if (bytes >= kMappedFrom && mappings().contains(t.data(), bytes))
      zero_mapped(t.data(), bytes);
    else
      std::memset(t.data(), 0, bytes);
  }

  void do_copy(const Tensor& src, Tensor& dst) override {
    std::memcpy(dst.data(), src.data(), static_cast<size_t>(src.bytes()));
  }

  // f32, or a bf16 recurrent state (recurrent_state_dtype) converted.
  void do_copy_to_host(const Tensor& src, std::span<float> dst) override {
    if (src.dtype() == DType::bf16) {
      const auto* h = src.data_as<const uint16_t>();
      for (size_t i = 0; i < dst.size(); ++i) dst[i] = ds::bf16_to_f32(h[i]);
      return;
    }
    std::memcpy(dst.data(), src.data(), dst.size() * sizeof(float));
  }

  void do_copy_from_host(std::span<const float> src, Tensor& dst) override {
    if (dst.dtype() == DType::bf16) {
      auto* h = dst.data_as<uint16_t>();
      for (size_t i = 0; i < src.size(); ++i) h[i] = ds::f32_to_bf16(src[i]);
      return;
    }
    std::memcpy(dst.data(), src.data(), src.size() * sizeof(float));
  }

  std::unique_ptr<BatchPlan> plan(const BatchDesc& desc) override {
    return std::make_unique<BatchPlan>(desc);
  }

  void do_embedding(const Tensor& table, const BatchPlan& plan, Tensor& out) override {
    cpu::embedding(pool_, table, plan, out);
  }
  void do_gather_rows(const Tensor& x, const BatchPlan& plan, Tensor& out) override {
    cpu::gather_rows(x, plan, out);
  }
  void do_rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) override {
    cpu::rms_norm(pool_, x, weight, eps, out);
  }
  void do_gemm(const Tensor& x, const Tensor& w, Tensor& out, bool accumulate) override {
    cpu::gemm(pool_, x, w, out, accumulate);
  }
  void do_swiglu(const Tensor& gate_up, Tensor& out) override { cpu::swiglu(pool_, gate_up, out); }
  void do_split_query_gate(const Tensor& qg, Tensor& q, Tensor& gate) override {
    cpu::split_query_gate(qg, q, gate);
  }
  void do_split_columns(const Tensor& x, std::span<Tensor> parts) override { cpu::split_columns(x, parts); }
  int64_t fused_projection_rows() const override { return fused_projection_rows_; }
  void do_rope(Tensor& x, const BatchPlan& plan, const RopeParams& params) override {
    cpu::rope(pool_, x, plan, params);
  }
  void do_sigmoid_gate(Tensor& x, const Tensor& gate) override { cpu::sigmoid_gate(pool_, x, gate); }
  void do_kv_write(const Tensor& k, const Tensor& v, const BatchPlan& plan, Tensor& k_pool,
                Tensor& v_pool) override {
    cpu::kv_write(k, v, plan, k_pool, v_pool);
  }
  void do_paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool,
                       const BatchPlan& plan, float scale, Tensor& out) override {
    cpu::paged_attention(pool_, q, k_pool, v_pool, plan, scale, out);
  }
  void do_causal_conv1d(const Tensor& x, const Tensor& weight, Tensor& conv_state, int64_t layer,
                     const BatchPlan& plan, Tensor& out) override {
    cpu::causal_conv1d(pool_, x, weight, conv_state, layer, plan, out);
  }
  void do_gated_delta_rule(const Tensor& qkv, const Tensor& a, const Tensor& b, const Tensor& a_log,
                        const Tensor& dt_bias, Tensor& recurrent_state, int64_t layer,
                        const BatchPlan& plan, const DeltaNetDims& dims, Tensor& out) override {
    cpu::gated_delta_rule(pool_, qkv, a, b, a_log, dt_bias, recurrent_state, layer, plan, dims, out);
  }
  void do_gated_rms_norm(const Tensor& x, const Tensor& z, const Tensor& weight, float eps,
                      Tensor& out) override {
    cpu::gated_rms_norm(pool_, x, z, weight, eps, out);
  }
  void do_lora_shrink(const Tensor& x, const Tensor& a, const BatchPlan& plan, Tensor& tmp) override {
    cpu::lora_shrink(pool_, x, a, plan, tmp);
  }
  void do_lora_expand(const Tensor& tmp, int64_t first_rank, const Tensor& b, const BatchPlan& plan,
                      int64_t col_offset, Tensor& out) override {
    cpu::lora_expand(pool_, tmp, first_rank, b, plan, col_offset, out);
  }
  void do_lora_expand_group(const Tensor& tmp, std::span<const LoraExpandMember> members,
                            const BatchPlan& plan) override {
    // The members' expands in turn: a launch costs nothing here, and each member's sums are
    // then lora_expand's by construction.
    for (const LoraExpandMember& m : members) {
      Tensor out = m.out;
      cpu::lora_expand(pool_, tmp, m.first_rank, m.b, plan, m.col_offset, out);
    }
  }
  void do_layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& out) override {
    cpu::layer_norm(pool_, x, weight, bias, eps, out);
  }
  void do_add_bias(Tensor& x, const Tensor& bias) override { cpu::add_bias(pool_, x, bias); }
  void do_gelu(const Tensor& x, const Tensor& bias, Gelu kind, Tensor& out) override {
    cpu::gelu(pool_, x, bias, kind, out);
  }
  void do_add_position_embedding(const Tensor& table, const VisionPlan& plan, Tensor& x) override {
    cpu::add_position_embedding(pool_, table, plan, x);
  }
  void do_rotary_embedding(Tensor& x, const VisionPlan& plan) override { cpu::rotary_embedding(pool_, x, plan); }
  void do_segment_attention(const Tensor& q, const Tensor& k, const Tensor& v, const VisionPlan& plan, float scale,
                            Tensor& out) override {
    cpu::segment_attention(pool_, q, k, v, plan, scale, out);
  }

 private:
  ThreadPool pool_;
  int64_t fused_projection_rows_;
  DType recurrent_state_dtype_;
  bool int4_weights_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(CpuBackendOptions options) {
  const DType t = options.recurrent_state_dtype;
  if (t != DType::f32 && t != DType::bf16)
    throw std::invalid_argument("cpu backend: recurrent state type " + std::string(dtype_name(t)) +
                                " (supported: f32, bf16)");
  return std::make_unique<CpuBackend>(options);
}

}  // namespace ds::kernels::cpu
