// The Backend contract (backend.h), checked once for every backend: each op checks its
// arguments' types and shapes, then runs the backend's do_<op>.
#include "kernels/backend.h"
#include "kernels/contract.h"

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

namespace ds::kernels {
using namespace contract;
namespace {

// K and V pools of one [blocks, block_size, Nkv, D] shape in `type`, holding the plan's blocks.
void require_pools(const Tensor& k_pool, const Tensor& v_pool, const BatchPlan& plan, DType type, const char* op) {
  require_type(k_pool, op, "k_pool", type);
  require_type(v_pool, op, "v_pool", type);
  DS_REQUIRE(k_pool.rank() == 4 && v_pool.shape() == k_pool.shape(), op,
             "k_pool and v_pool must be one [blocks, block_size, Nkv, D] shape, got " + k_pool.shape().str() + ", " +
                 v_pool.shape().str());
  DS_REQUIRE(k_pool.dim(1) == plan.block_size(), op, "pool block size differs from the batch's");
  DS_REQUIRE(plan.max_block_id() < k_pool.dim(0), op,
             "block id " + std::to_string(plan.max_block_id()) + " outside the pool of " +
                 std::to_string(k_pool.dim(0)) + " blocks");
  DS_REQUIRE(!is_quantized(type) || k_pool.dim(3) % 32 == 0, op,
             "a " + type_name(type) + " K/V cache needs a head dim that is a multiple of 32");
}

// A plan with M-RoPE positions needs sections that fit the rotary frequencies.
void require_mrope(const BatchPlan& plan, const RopeParams& p, const char* op) {
  if (!plan.has_mrope()) return;
  const auto& s = p.mrope_section;
  DS_REQUIRE(s[0] > 0 && s[1] >= 0 && s[2] >= 0 && s[0] + s[1] + s[2] == p.rotary_dim / 2, op,
             "M-RoPE positions need an mrope_section summing to rotary_dim / 2 = " + std::to_string(p.rotary_dim / 2));
}

// A DeltaNet state tensor [slots, layers, ...] holding `layer` and the plan's state slots.
void require_state(const Tensor& state, int64_t layer, const BatchPlan& plan, const char* op) {
  DS_REQUIRE(layer >= 0 && layer < state.dim(1), op, "layer " + std::to_string(layer) + " outside the state");
  DS_REQUIRE(plan.max_state_slot() < state.dim(0), op, "state slot outside the state");
}

}  // namespace

// ---- memory

void Backend::fill_zero(Tensor& t) {
  DS_REQUIRE(!t.empty() || t.numel() == 0, "fill_zero", "empty tensor");
  do_fill_zero(t);
}

void Backend::copy(const Tensor& src, Tensor& dst) {
  DS_REQUIRE(!src.empty() && !dst.empty(), "copy", "empty tensor");
  DS_REQUIRE(src.dtype() == dst.dtype() && src.numel() == dst.numel(), "copy",
             "src " + src.shape().str() + " and dst " + dst.shape().str() + " differ");
  if (src.numel() > 0) do_copy(src, dst);
}

namespace {
// What copy_to_host and copy_from_host convert: f32, and the backend's other float types.
void require_host_copyable(const Tensor& t, const char* op, const char* name, DType activations, DType state) {
  if (t.dtype() == state) return;
  require_f32_or(t, op, name, activations);
}
}  // namespace

void Backend::copy_to_host(const Tensor& src, std::span<float> dst) {
  require_host_copyable(src, "copy_to_host", "src", activation_dtype(), recurrent_state_dtype());
  DS_REQUIRE(static_cast<int64_t>(dst.size()) == src.numel(), "copy_to_host",
             "destination holds " + std::to_string(dst.size()) + " floats, tensor " + src.shape().str());
  if (!dst.empty()) do_copy_to_host(src, dst);
}

void Backend::copy_from_host(std::span<const float> src, Tensor& dst) {
  require_host_copyable(dst, "copy_from_host", "dst", activation_dtype(), recurrent_state_dtype());
  DS_REQUIRE(static_cast<int64_t>(src.size()) == dst.numel(), "copy_from_host",
             "source holds " + std::to_string(src.size()) + " floats, tensor " + dst.shape().str());
  if (!src.empty()) do_copy_from_host(src, dst);
}

// ---- ops

void Backend::embedding(const Tensor& table, const BatchPlan& plan, Tensor& out) {
  const char* op = "embedding";
  require_f32_or(table, op, "table", activation_dtype());
  require_type(out, op, "out", DType::f32);
  DS_REQUIRE(table.rank() == 2, op, "table must be [V, H], got " + table.shape().str());
  const int64_t vocab = table.dim(0), h = table.dim(1);
  DS_REQUIRE((out.shape() == Shape{plan.num_rows(), h}), op,
             "out must be [rows, H] = " + Shape{plan.num_rows(), h}.str() + ", got " + out.shape().str());
  for (int32_t id : plan.token_ids()) DS_REQUIRE(id < vocab, op, "token id " + std::to_string(id) + " outside the table");
  do_embedding(table, plan, out);
}

void Backend::gather_rows(const Tensor& x, const BatchPlan& plan, Tensor& out) {
  const char* op = "gather_rows";
  require_type(x, op, "x", DType::f32);
  require_type(out, op, "out", DType::f32);
  DS_REQUIRE(x.rank() == 2 && x.dim(0) == plan.num_rows(), op, "x must be [rows, H], got " + x.shape().str());
  DS_REQUIRE((out.shape() == Shape{static_cast<int64_t>(plan.logit_rows().size()), x.dim(1)}), op,
             "out must be [logit rows, H], got " + out.shape().str());
  do_gather_rows(x, plan, out);
}

void Backend::rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out) {
  const char* op = "rms_norm";
  require_f32_or(x, op, "x", activation_dtype());
  require_type(weight, op, "weight", DType::f32);
  require_f32_or(out, op, "out", activation_dtype());
  require_rows_of(x, weight, op);
  DS_REQUIRE(out.shape() == x.shape(), op, "out " + out.shape().str() + " must match x " + x.shape().str());
  DS_REQUIRE(out.data() != x.data() || out.dtype() == x.dtype(), op, "in place needs out of x's type");
  do_rms_norm(x, weight, eps, out);
}

void Backend::gemm(const Tensor& x, const Tensor& w, Tensor& out, bool accumulate) {
  const char* op = "gemm";
  require_f32_or(x, op, "x", activation_dtype());
  require_weight(*this, w, op, "w");
  require_type(out, op, "out", DType::f32);
  DS_REQUIRE(x.rank() == 2 && w.rank() == 2 && out.rank() == 2, op,
             "x, w, out must be 2-D, got " + x.shape().str() + ", " + w.shape().str() + ", " + out.shape().str());
  const int64_t m = x.dim(0), k = x.dim(1), n = w.dim(0);
  DS_REQUIRE(w.dim(1) == k, op, "x " + x.shape().str() + " and w " + w.shape().str() + " disagree on K");
  DS_REQUIRE(out.dim(0) == m && out.dim(1) == n, op, "out must be " + Shape{m, n}.str() + ", got " + out.shape().str());
  if (m == 0 || n == 0) return;
  do_gemm(x, w, out, accumulate);
}

void Backend::gemm_bias(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& out, bool accumulate) {
  const char* op = "gemm_bias";
  require_f32_or(x, op, "x", activation_dtype());
  require_weight(*this, w, op, "w");
  require_type(bias, op, "bias", DType::f32);
  require_type(out, op, "out", DType::f32);
  DS_REQUIRE(x.rank() == 2 && w.rank() == 2 && out.rank() == 2, op,
             "x, w, out must be 2-D, got " + x.shape().str() + ", " + w.shape().str() + ", " + out.shape().str());
  const int64_t m = x.dim(0), k = x.dim(1), n = w.dim(0);
  DS_REQUIRE(w.dim(1) == k, op, "x " + x.shape().str() + " and w " + w.shape().str() + " disagree on K");
  DS_REQUIRE(out.dim(0) == m && out.dim(1) == n, op, "out must be " + Shape{m, n}.str() + ", got " + out.shape().str());
  DS_REQUIRE(bias.numel() == n, op, "bias must have " + std::to_string(n) + " values, got " + bias.shape().str());
  if (m == 0 || n == 0) return;
  do_gemm_bias(x, w, bias, out, accumulate);
}

void Backend::swiglu(const Tensor& gate_up, Tensor& out) {
  const char* op = "swiglu";
  require_type(gate_up, op, "gate_up", DType::f32);
  require_f32_or(out, op, "out", activation_dtype());
  DS_REQUIRE(gate_up.rank() == 2 && gate_up.dim(1) % 2 == 0, op,
             "gate_up must be [M, 2I], got " + gate_up.shape().str());
  const int64_t m = gate_up.dim(0), inter = gate_up.dim(1) / 2;
  DS_REQUIRE((out.shape() == Shape{m, inter}), op, "out must be " + Shape{m, inter}.str() + ", got " + out.shape().str());
  do_swiglu(gate_up, out);
}

void Backend::gate_up_swiglu(const Tensor& x, const Tensor& gate_up, Tensor& scratch, Tensor& out) {
  const char* op = "gate_up_swiglu";
  require_f32_or(x, op, "x", activation_dtype());
  require_weight(*this, gate_up, op, "gate_up");
  require_type(scratch, op, "scratch", DType::f32);
  require_f32_or(out, op, "out", activation_dtype());
  DS_REQUIRE(x.rank() == 2 && gate_up.rank() == 2 && gate_up.dim(1) == x.dim(1) && gate_up.dim(0) % 2 == 0, op,
             "x [M, K] and gate_up [2I, K] disagree: " + x.shape().str() + ", " + gate_up.shape().str());
  const int64_t m = x.dim(0), inter = gate_up.dim(0) / 2;
  DS_REQUIRE((scratch.shape() == Shape{m, 2 * inter} && out.shape() == Shape{m, inter}), op,
             "scratch and out must be " + Shape{m, 2 * inter}.str() + " and " + Shape{m, inter}.str() + ", got " +
                 scratch.shape().str() + ", " + out.shape().str());
  do_gate_up_swiglu(x, gate_up, scratch, out);
}

void Backend::split_query_gate(const Tensor& qg, Tensor& q, Tensor& gate) {
  const char* op = "split_query_gate";
  require_type(qg, op, "qg", DType::f32);
  require_type(q, op, "q", DType::f32);
  require_type(gate, op, "gate", DType::f32);
  DS_REQUIRE(qg.rank() == 3 && qg.dim(2) % 2 == 0, op, "qg must be [M, Nq, 2D], got " + qg.shape().str());
  const Shape want{qg.dim(0), qg.dim(1), qg.dim(2) / 2};
  DS_REQUIRE(q.shape() == want && gate.shape() == want, op,
             "q and gate must be " + want.str() + ", got " + q.shape().str() + ", " + gate.shape().str());
  do_split_query_gate(qg, q, gate);
}

void Backend::split_columns(const Tensor& x, std::span<Tensor> parts) {
  const char* op = "split_columns";
  require_type(x, op, "x", DType::f32);
  DS_REQUIRE(x.rank() == 2, op, "x must be [M, N], got " + x.shape().str());
  DS_REQUIRE(!parts.empty() && parts.size() <= static_cast<size_t>(kMaxSplitParts), op,
             "between 1 and " + std::to_string(kMaxSplitParts) + " parts, got " + std::to_string(parts.size()));
  const int64_t m = x.dim(0), n = x.dim(1);
  int64_t total = 0;
  for (const Tensor& p : parts) {
    require_type(p, op, "part", DType::f32);
    DS_REQUIRE(p.rank() >= 1 && p.dim(0) == m, op,
               "each part must have " + std::to_string(m) + " rows, got " + p.shape().str());
    total += m > 0 ? p.numel() / m : 0;
  }
  DS_REQUIRE(total == n, op, "the parts hold " + std::to_string(total) + " columns, x has " + std::to_string(n));
  do_split_columns(x, parts);
}

std::vector<float> rope_frequencies(const RopeParams& params) {
  if (!params.inv_freq.empty()) return params.inv_freq;
  const int64_t r = params.rotary_dim, half = r / 2;
  std::vector<float> f(static_cast<size_t>(half));
  const float theta = static_cast<float>(params.theta);
  for (int64_t i = 0; i < half; ++i) {
    const float e = static_cast<float>(2 * i) / static_cast<float>(r);
    f[static_cast<size_t>(i)] = 1.0f / static_cast<float>(std::pow(static_cast<double>(theta), static_cast<double>(e)));
  }
  return f;
}

namespace {

void check_rope_params(const char* op, const RopeParams& p, int64_t d) {
  DS_REQUIRE(p.rotary_dim > 0 && p.rotary_dim % 2 == 0 && p.rotary_dim <= d, op,
             "rotary dim " + std::to_string(p.rotary_dim) + " must be even and within head dim " + std::to_string(d));
  if (p.inv_freq.empty()) {
    DS_REQUIRE(p.theta > 0, op, "theta must be positive");
  } else {
    DS_REQUIRE(static_cast<int64_t>(p.inv_freq.size()) == p.rotary_dim / 2, op,
               "inv_freq must hold rotary dim / 2 = " + std::to_string(p.rotary_dim / 2) + " frequencies, got " +
                   std::to_string(p.inv_freq.size()));
    for (float f : p.inv_freq) DS_REQUIRE(std::isfinite(f) && f > 0, op, "inv_freq must be finite and positive");
  }
  DS_REQUIRE(std::isfinite(p.attention_scaling) && p.attention_scaling > 0, op,
             "attention_scaling must be finite and positive");
}

}  // namespace

void Backend::rope(Tensor& x, const BatchPlan& plan, const RopeParams& params) {
  const char* op = "rope";
  require_type(x, op, "x", DType::f32);
  DS_REQUIRE(x.rank() == 3 && x.dim(0) == plan.num_rows(), op, "x must be [rows, heads, D], got " + x.shape().str());
  check_rope_params(op, params, x.dim(2));
  require_mrope(plan, params, op);
  do_rope(x, plan, params);
}

void Backend::prepare_qk(const Tensor& qg, const Tensor& q_norm, const Tensor& k_norm, float eps, const BatchPlan& plan,
                         const RopeParams& rope_params, Tensor& q, Tensor& gate, Tensor& k) {
  const char* op = "prepare_qk";
  for (const auto& [t, name] : {std::pair<const Tensor*, const char*>{&qg, "qg"}, {&q_norm, "q_norm"},
                                {&k_norm, "k_norm"}, {&q, "q"}, {&gate, "gate"}, {&k, "k"}})
    require_type(*t, op, name, DType::f32);
  DS_REQUIRE(qg.rank() == 3 && qg.dim(0) == plan.num_rows() && qg.dim(2) % 2 == 0, op,
             "qg must be [rows, Nq, 2D], got " + qg.shape().str());
  const int64_t d = qg.dim(2) / 2;
  const Shape want{qg.dim(0), qg.dim(1), d};
  DS_REQUIRE(q.shape() == want && gate.shape() == want, op,
             "q and gate must be " + want.str() + ", got " + q.shape().str() + ", " + gate.shape().str());
  DS_REQUIRE(k.rank() == 3 && k.dim(0) == qg.dim(0) && k.dim(2) == d, op,
             "k must be [rows, Nkv, " + std::to_string(d) + "], got " + k.shape().str());
  DS_REQUIRE(q_norm.numel() == d && k_norm.numel() == d, op, "q_norm and k_norm must have D elements");
  check_rope_params(op, rope_params, d);
  require_mrope(plan, rope_params, op);
  do_prepare_qk(qg, q_norm, k_norm, eps, plan, rope_params, q, gate, k);
}

void Backend::sigmoid_gate(Tensor& x, const Tensor& gate) {
  const char* op = "sigmoid_gate";
  require_f32_or(x, op, "x", activation_dtype());
  require_type(gate, op, "gate", DType::f32);
  DS_REQUIRE(x.shape() == gate.shape(), op, "x " + x.shape().str() + " and gate " + gate.shape().str() + " differ");
  do_sigmoid_gate(x, gate);
}

void Backend::kv_write(const Tensor& k, const Tensor& v, const BatchPlan& plan, Tensor& k_pool, Tensor& v_pool) {
  const char* op = "kv_write";
  require_type(k, op, "k", DType::f32);
  require_type(v, op, "v", DType::f32);
  DS_REQUIRE(k.rank() == 3 && k.dim(0) == plan.num_rows() && v.shape() == k.shape(), op,
             "k and v must be one [rows, Nkv, D] shape, got " + k.shape().str() + ", " + v.shape().str());
  require_pools(k_pool, v_pool, plan, kv_cache_dtype(), op);
  DS_REQUIRE(k_pool.dim(2) == k.dim(1) && k_pool.dim(3) == k.dim(2), op,
             "pools must be [blocks, block_size, " + std::to_string(k.dim(1)) + ", " + std::to_string(k.dim(2)) +
                 "], got " + k_pool.shape().str());
  do_kv_write(k, v, plan, k_pool, v_pool);
}

void Backend::paged_attention(const Tensor& q, const Tensor& k_pool, const Tensor& v_pool, const BatchPlan& plan,
                              float scale, Tensor& out) {
  const char* op = "paged_attention";
  require_type(q, op, "q", DType::f32);
  require_f32_or(out, op, "out", activation_dtype());
  DS_REQUIRE(q.rank() == 3 && q.dim(0) == plan.num_rows(), op, "q must be [rows, Nq, D], got " + q.shape().str());
  DS_REQUIRE(out.shape() == q.shape(), op, "out " + out.shape().str() + " must match q " + q.shape().str());
  require_pools(k_pool, v_pool, plan, kv_cache_dtype(), op);
  DS_REQUIRE(k_pool.dim(3) == q.dim(2), op, "pool head dim differs from q's");
  const int64_t n_q = q.dim(1), n_kv = k_pool.dim(2);
  DS_REQUIRE(n_kv > 0 && n_q % n_kv == 0, op,
             std::to_string(n_q) + " query heads do not group over " + std::to_string(n_kv) + " KV heads");
  do_paged_attention(q, k_pool, v_pool, plan, scale, out);
}

void Backend::causal_conv1d(const Tensor& x, const Tensor& weight, Tensor& conv_state, int64_t layer,
                            const BatchPlan& plan, Tensor& out) {
  const char* op = "causal_conv1d";
  require_type(x, op, "x", DType::f32);
  require_type(weight, op, "weight", DType::f32);
  require_type(conv_state, op, "conv_state", DType::f32);
  require_type(out, op, "out", DType::f32);
  DS_REQUIRE(x.rank() == 2 && x.dim(0) == plan.num_rows(), op, "x must be [rows, C], got " + x.shape().str());
  DS_REQUIRE(out.shape() == x.shape(), op, "out " + out.shape().str() + " must match x " + x.shape().str());
  const int64_t ch = x.dim(1);
  DS_REQUIRE(weight.rank() == 3 && weight.dim(0) == ch && weight.dim(1) == 1 && weight.dim(2) >= 1, op,
             "weight must be [C, 1, Kc] with C = " + std::to_string(ch) + ", got " + weight.shape().str());
  const int64_t taps = weight.dim(2) - 1;
  DS_REQUIRE(conv_state.rank() == 4 && conv_state.dim(2) == ch && conv_state.dim(3) == taps, op,
             "conv_state must be [slots, layers, " + std::to_string(ch) + ", " + std::to_string(taps) + "], got " +
                 conv_state.shape().str());
  require_state(conv_state, layer, plan, op);
  do_causal_conv1d(x, weight, conv_state, layer, plan, out);
}

void Backend::gated_delta_rule(const Tensor& qkv, const Tensor& a, const Tensor& b, const Tensor& a_log,
                               const Tensor& dt_bias, Tensor& recurrent_state, int64_t layer, const BatchPlan& plan,
                               const DeltaNetDims& dims, Tensor& out) {
  const char* op = "gated_delta_rule";
  for (const auto& [t, name] :
       {std::pair<const Tensor*, const char*>{&qkv, "qkv"}, {&a, "a"}, {&b, "b"}, {&a_log, "a_log"},
        {&dt_bias, "dt_bias"}, {&out, "out"}})
    require_type(*t, op, name, DType::f32);
  require_type(recurrent_state, op, "recurrent_state", recurrent_state_dtype());
  const int64_t hk = dims.k_heads, hv = dims.v_heads, dk = dims.k_dim, dv = dims.v_dim;
  DS_REQUIRE(hk > 0 && hv > 0 && dk > 0 && dv > 0 && hv % hk == 0, op,
             "value heads must be a positive multiple of key heads");
  const int64_t rows = plan.num_rows();
  DS_REQUIRE((qkv.shape() == Shape{rows, dims.conv_dim()}), op,
             "qkv must be " + Shape{rows, dims.conv_dim()}.str() + ", got " + qkv.shape().str());
  DS_REQUIRE((a.shape() == Shape{rows, hv} && b.shape() == Shape{rows, hv}), op,
             "a and b must be " + Shape{rows, hv}.str() + ", got " + a.shape().str() + ", " + b.shape().str());
  DS_REQUIRE(a_log.numel() == hv && dt_bias.numel() == hv, op, "A_log and dt_bias must have Hv elements");
  DS_REQUIRE((out.shape() == Shape{rows, hv, dv}), op,
             "out must be " + Shape{rows, hv, dv}.str() + ", got " + out.shape().str());
  DS_REQUIRE(recurrent_state.rank() == 5 && recurrent_state.dim(2) == hv && recurrent_state.dim(3) == dk &&
                 recurrent_state.dim(4) == dv,
             op, "recurrent_state must be [slots, layers, Hv, dk, dv], got " + recurrent_state.shape().str());
  require_state(recurrent_state, layer, plan, op);
  do_gated_delta_rule(qkv, a, b, a_log, dt_bias, recurrent_state, layer, plan, dims, out);
}

void Backend::gated_rms_norm(const Tensor& x, const Tensor& z, const Tensor& weight, float eps, Tensor& out) {
  const char* op = "gated_rms_norm";
  require_type(x, op, "x", DType::f32);
  require_type(z, op, "z", DType::f32);
  require_type(weight, op, "weight", DType::f32);
  require_f32_or(out, op, "out", activation_dtype());
  require_rows_of(x, weight, op);
  DS_REQUIRE(z.shape() == x.shape() && out.shape() == x.shape(), op,
             "x, z and out must have one shape, got " + x.shape().str() + ", " + z.shape().str() + ", " +
                 out.shape().str());
  DS_REQUIRE(out.data() != x.data() || out.dtype() == DType::f32, op, "in place needs an f32 out");
  do_gated_rms_norm(x, z, weight, eps, out);
}

}  // namespace ds::kernels

namespace ds::kernels {
using namespace contract;

namespace {
// A LoRA slot pool [slots, d1, d2] f32 that holds every slot the plan's rows name.
void require_lora_pool(const Tensor& pool, const BatchPlan& plan, const char* op, const char* name) {
  require_type(pool, op, name, DType::f32);
  DS_REQUIRE(pool.rank() == 3, op, std::string(name) + " must be [slots, ., .], got " + pool.shape().str());
  DS_REQUIRE(plan.max_lora_slot() < pool.dim(0), op,
             "LoRA slot " + std::to_string(plan.max_lora_slot()) + " outside the pool of " +
                 std::to_string(pool.dim(0)) + " slots");
}

// One expand's operands (lora_expand, or a member of lora_expand_group) against the plan.
void require_lora_expand(const Tensor& tmp, int64_t first_rank, const Tensor& b, const BatchPlan& plan,
                         int64_t col_offset, const Tensor& out, const char* op) {
  require_type(tmp, op, "tmp", DType::f32);
  require_lora_pool(b, plan, op, "b");
  require_type(out, op, "out", DType::f32);
  const int64_t rows = plan.num_rows();
  DS_REQUIRE(tmp.rank() == 2 && tmp.dim(0) == rows && first_rank >= 0 && first_rank + b.dim(2) <= tmp.dim(1), op,
             "tmp " + tmp.shape().str() + " must have " + std::to_string(rows) + " rows and rank columns [" +
                 std::to_string(first_rank) + ", " + std::to_string(first_rank + b.dim(2)) + ")");
  DS_REQUIRE(out.rank() == 2 && out.dim(0) == rows && col_offset >= 0 && col_offset + b.dim(1) <= out.dim(1), op,
             "out " + out.shape().str() + " must have " + std::to_string(rows) + " rows and columns [" +
                 std::to_string(col_offset) + ", " + std::to_string(col_offset + b.dim(1)) + ")");
}

// Whether two members' writes may meet (rows > 0): within one output (same start and row
// length), their column ranges; across outputs, the spans of memory from each one's first
// written element to its last (conservative: the model's outputs are separate buffers or
// disjoint views of one).
bool lora_writes_meet(const LoraExpandMember& p, const LoraExpandMember& q, int64_t rows) {
  const int64_t np = p.b.dim(1), nq = q.b.dim(1);
  if (p.out.data() == q.out.data() && p.out.dim(1) == q.out.dim(1))
    return p.col_offset < q.col_offset + nq && q.col_offset < p.col_offset + np;
  auto span = [rows](const LoraExpandMember& m, int64_t n) {
    const auto first = reinterpret_cast<uintptr_t>(m.out.data_as<const float>() + m.col_offset);
    return std::pair{first, first + static_cast<uintptr_t>(((rows - 1) * m.out.dim(1) + n) * 4)};
  };
  const auto [p0, p1] = span(p, np);
  const auto [q0, q1] = span(q, nq);
  return p0 < q1 && q0 < p1;
}
}  // namespace

void Backend::lora_shrink(const Tensor& x, const Tensor& a, const BatchPlan& plan, Tensor& tmp) {
  const char* op = "lora_shrink";
  require_f32_or(x, op, "x", activation_dtype());
  require_lora_pool(a, plan, op, "a");
  require_type(tmp, op, "tmp", DType::f32);
  const int64_t rows = plan.num_rows();
  DS_REQUIRE(x.rank() == 2 && x.dim(0) == rows && x.dim(1) == a.dim(2), op,
             "x must be [rows, K] = " + Shape{rows, a.dim(2)}.str() + ", got " + x.shape().str());
  DS_REQUIRE((tmp.shape() == Shape{rows, a.dim(1)}), op,
             "tmp must be " + Shape{rows, a.dim(1)}.str() + ", got " + tmp.shape().str());
  if (rows == 0 || a.dim(1) == 0) return;
  do_lora_shrink(x, a, plan, tmp);
}

void Backend::lora_expand(const Tensor& tmp, int64_t first_rank, const Tensor& b, const BatchPlan& plan,
                          int64_t col_offset, Tensor& out) {
  require_lora_expand(tmp, first_rank, b, plan, col_offset, out, "lora_expand");
  if (plan.num_rows() == 0 || b.dim(1) == 0 || b.dim(2) == 0) return;
  do_lora_expand(tmp, first_rank, b, plan, col_offset, out);
}

void Backend::lora_expand_group(const Tensor& tmp, std::span<const LoraExpandMember> members,
                                const BatchPlan& plan) {
  const char* op = "lora_expand_group";
  DS_REQUIRE(!members.empty() && members.size() <= static_cast<size_t>(kMaxLoraExpandMembers), op,
             "takes 1 to " + std::to_string(kMaxLoraExpandMembers) + " members, got " +
                 std::to_string(members.size()));
  // The members with something to write, as lora_expand skips an empty one.
  std::array<LoraExpandMember, kMaxLoraExpandMembers> live;
  size_t n = 0;
  const int64_t rows = plan.num_rows();
  for (size_t i = 0; i < members.size(); ++i) {
    const LoraExpandMember& m = members[i];
    require_lora_expand(tmp, m.first_rank, m.b, plan, m.col_offset, m.out, op);
    if (m.b.dim(1) == 0 || m.b.dim(2) == 0) continue;
    for (size_t j = 0; j < n; ++j)
      DS_REQUIRE(rows == 0 || !lora_writes_meet(live[j], m, rows), op,
                 "member " + std::to_string(i) + " writes where an earlier member writes");
    live[n++] = m;
  }
  if (rows == 0 || n == 0) return;
  do_lora_expand_group(tmp, std::span<const LoraExpandMember>(live.data(), n), plan);
}

}  // namespace ds::kernels
