// The Backend contract of the vision encoder's ops (backend.h), as backend.cpp does for the
// language model's.
#include "kernels/backend.h"
#include "kernels/contract.h"

namespace ds::kernels {
using namespace contract;

void Backend::layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& out) {
  const char* op = "layer_norm";
  require_type(x, op, "x", DType::f32);
  require_type(weight, op, "weight", DType::f32);
  require_type(bias, op, "bias", DType::f32);
  require_f32_or(out, op, "out", activation_dtype());
  DS_REQUIRE(x.rank() == 2 && weight.numel() == x.dim(1) && bias.numel() == x.dim(1), op,
             "x must be [n, d] with weight and bias of d, got " + x.shape().str() + ", " + weight.shape().str() + ", " +
                 bias.shape().str());
  DS_REQUIRE(out.shape() == x.shape(), op, "out " + out.shape().str() + " must match x " + x.shape().str());
  DS_REQUIRE(eps > 0, op, "eps must be positive");
  if (x.numel() > 0) do_layer_norm(x, weight, bias, eps, out);
}

void Backend::add_bias(Tensor& x, const Tensor& bias) {
  const char* op = "add_bias";
  require_type(x, op, "x", DType::f32);
  require_type(bias, op, "bias", DType::f32);
  DS_REQUIRE(x.rank() == 2 && bias.numel() == x.dim(1), op,
             "x must be [n, d] with a bias of d, got " + x.shape().str() + ", " + bias.shape().str());
  if (x.numel() > 0) do_add_bias(x, bias);
}

void Backend::gelu(const Tensor& x, const Tensor& bias, Gelu kind, Tensor& out) {
  const char* op = "gelu";
  require_type(x, op, "x", DType::f32);
  require_type(bias, op, "bias", DType::f32);
  require_f32_or(out, op, "out", activation_dtype());
  DS_REQUIRE(x.rank() == 2 && out.shape() == x.shape() && bias.numel() == x.dim(1), op,
             "x and out must be one [n, d] shape with a bias of d, got " + x.shape().str() + ", " + out.shape().str() +
                 ", " + bias.shape().str());
  DS_REQUIRE(out.data() != x.data() || out.dtype() == DType::f32, op, "in place needs an f32 out");
  if (x.numel() > 0) do_gelu(x, bias, kind, out);
}

void Backend::gemm_bias_gelu(const Tensor& x, const Tensor& w, const Tensor& bias, Gelu kind, Tensor& scratch,
                             Tensor& out) {
  const char* op = "gemm_bias_gelu";
  require_f32_or(x, op, "x", activation_dtype());
  require_weight(*this, w, op, "w");
  require_type(bias, op, "bias", DType::f32);
  require_type(scratch, op, "scratch", DType::f32);
  require_f32_or(out, op, "out", activation_dtype());
  DS_REQUIRE(x.rank() == 2 && w.rank() == 2 && out.rank() == 2, op,
             "x, w, out must be 2-D, got " + x.shape().str() + ", " + w.shape().str() + ", " + out.shape().str());
  const int64_t m = x.dim(0), n = w.dim(0);
  DS_REQUIRE(w.dim(1) == x.dim(1), op, "x " + x.shape().str() + " and w " + w.shape().str() + " disagree on K");
  DS_REQUIRE(out.dim(0) == m && out.dim(1) == n && scratch.shape() == out.shape(), op,
             "out and scratch must be " + Shape{m, n}.str() + ", got " + out.shape().str() + ", " +
                 scratch.shape().str());
  DS_REQUIRE(bias.numel() == n, op, "bias must have " + std::to_string(n) + " values, got " + bias.shape().str());
  if (m == 0 || n == 0) return;
  do_gemm_bias_gelu(x, w, bias, kind, scratch, out);
}

void Backend::add_position_embedding(const Tensor& table, const VisionPlan& plan, Tensor& x) {
  const char* op = "add_position_embedding";
  require_f32_or(table, op, "table", activation_dtype());
  require_type(x, op, "x", DType::f32);
  DS_REQUIRE(table.rank() == 2 && table.dim(0) == plan.pos_table_rows(), op,
             "table must be [" + std::to_string(plan.pos_table_rows()) + ", d], got " + table.shape().str());
  DS_REQUIRE((x.shape() == Shape{plan.num_rows(), table.dim(1)}), op,
             "x must be " + Shape{plan.num_rows(), table.dim(1)}.str() + ", got " + x.shape().str());
  do_add_position_embedding(table, plan, x);
}

void Backend::rotary_embedding(Tensor& x, const VisionPlan& plan) {
  const char* op = "rotary_embedding";
  require_type(x, op, "x", DType::f32);
  DS_REQUIRE(x.rank() == 3 && x.dim(0) == plan.num_rows() && x.dim(2) == 2 * plan.rope_half(), op,
             "x must be [" + std::to_string(plan.num_rows()) + ", heads, " + std::to_string(2 * plan.rope_half()) +
                 "], got " + x.shape().str());
  do_rotary_embedding(x, plan);
}

void Backend::segment_attention(const Tensor& q, const Tensor& k, const Tensor& v, const VisionPlan& plan, float scale,
                                Tensor& out) {
  const char* op = "segment_attention";
  require_type(q, op, "q", DType::f32);
  require_type(k, op, "k", DType::f32);
  require_type(v, op, "v", DType::f32);
  require_f32_or(out, op, "out", activation_dtype());
  DS_REQUIRE(q.rank() == 3 && q.dim(0) == plan.num_rows() && k.shape() == q.shape() && v.shape() == q.shape() &&
                 out.shape() == q.shape(),
             op, "q, k, v and out must be one [" + std::to_string(plan.num_rows()) + ", heads, d] shape, got " +
                     q.shape().str() + ", " + k.shape().str() + ", " + v.shape().str() + ", " + out.shape().str());
  do_segment_attention(q, k, v, plan, scale, out);
}

void Backend::qkv_segment_attention(Tensor& qkv, const Tensor& bias, const VisionPlan& plan, float scale,
                                    Tensor& scratch, Tensor& out) {
  const char* op = "qkv_segment_attention";
  require_type(qkv, op, "qkv", DType::f32);
  require_type(bias, op, "bias", DType::f32);
  require_type(scratch, op, "scratch", DType::f32);
  require_f32_or(out, op, "out", activation_dtype());
  DS_REQUIRE(out.rank() == 3 && out.dim(0) == plan.num_rows() && out.dim(2) == 2 * plan.rope_half(), op,
             "out must be [" + std::to_string(plan.num_rows()) + ", heads, " + std::to_string(2 * plan.rope_half()) +
                 "], got " + out.shape().str());
  const int64_t n = out.dim(0), c = out.dim(1) * out.dim(2);
  DS_REQUIRE((qkv.shape() == Shape{n, 3 * c}) && bias.numel() == 3 * c, op,
             "qkv must be " + Shape{n, 3 * c}.str() + " with a bias of " + std::to_string(3 * c) + ", got " +
                 qkv.shape().str() + ", " + bias.shape().str());
  DS_REQUIRE((scratch.shape() == Shape{3 * n, c}), op,
             "scratch must be " + Shape{3 * n, c}.str() + ", got " + scratch.shape().str());
  do_qkv_segment_attention(qkv, bias, plan, scale, scratch, out);
}

void Backend::do_qkv_segment_attention(Tensor& qkv, const Tensor& bias, const VisionPlan& plan, float scale,
                                       Tensor& scratch, Tensor& out) {
  const int64_t n = out.dim(0);
  add_bias(qkv, bias);
  Tensor parts[] = {scratch.rows(0, n), scratch.rows(n, n), scratch.rows(2 * n, n)};
  split_columns(qkv, parts);
  Tensor q = parts[0].reshape(out.shape()), k = parts[1].reshape(out.shape()), v = parts[2].reshape(out.shape());
  rotary_embedding(q, plan);
  rotary_embedding(k, plan);
  segment_attention(q, k, v, plan, scale, out);
}

}  // namespace ds::kernels
