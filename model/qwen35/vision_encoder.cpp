#include "model/qwen35/vision_encoder.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace ds::qwen35 {

using kernels::Shape;
using kernels::Tensor;

struct VisionEncoder::Workspace {
  int64_t rows = 0;
  Tensor input;   // [N, 3 P P] act
  Tensor h;       // [N, C] f32: the residual stream
  Tensor xn;      // [N, C] act: normed GEMM input
  Tensor qkv;     // [N, 3C] f32
  Tensor qkv_parts;  // [3N, C] f32: qkv_segment_attention's scratch
  Tensor attn;    // [N, C] act
  Tensor mid;     // [N, max(I, C)] f32
  Tensor act;     // [N, max(I, C)] act
};

std::unique_ptr<VisionEncoder> VisionEncoder::load(kernels::Backend& backend, const std::filesystem::path& dir,
                                                   const Checkpoint& ckpt, const VisionConfig& config) {
  vision::ImageProcessorConfig proc = vision::ImageProcessorConfig::load(dir);
  const auto where = (dir / "preprocessor_config.json").string();
  if (proc.patch_size != config.patch_size || proc.merge_size != config.spatial_merge_size ||
      proc.temporal_patch_size != config.temporal_patch_size)
    throw std::runtime_error(where + ": patch_size / merge_size / temporal_patch_size " +
                             std::to_string(proc.patch_size) + " / " + std::to_string(proc.merge_size) + " / " +
                             std::to_string(proc.temporal_patch_size) + " disagree with config.json's vision_config (" +
                             std::to_string(config.patch_size) + " / " + std::to_string(config.spatial_merge_size) +
                             " / " + std::to_string(config.temporal_patch_size) + ")");
  VisionWeights w = load_vision_weights(backend, ckpt, config);
  return std::make_unique<VisionEncoder>(backend, config, proc, std::move(w));
}

VisionEncoder::VisionEncoder(kernels::Backend& backend, VisionConfig config, vision::ImageProcessorConfig processor,
                             VisionWeights weights)
    : backend_(&backend), config_(config), processor_(processor), weights_(std::move(weights)),
      ws_(std::make_unique<Workspace>()) {}

VisionEncoder::~VisionEncoder() = default;

VisionEncoder::Workspace& VisionEncoder::workspace(int64_t rows) {
  Workspace& w = *ws_;
  if (rows <= w.rows) return w;
  auto& be = *backend_;
  const auto& c = config_;
  const DType act = be.activation_dtype();
  const int64_t C = c.hidden_size, wide = std::max(c.intermediate_size, C);
  w = Workspace{};
  // Room for a video's rows (temporal_patch_size frames each); a still image uses 1 / T of it.
  w.input = be.alloc(act, Shape{rows * c.temporal_patch_size, c.patch_values()});
  w.h = be.alloc(DType::f32, Shape{rows, C});
  w.xn = be.alloc(act, Shape{rows, C});
  w.qkv = be.alloc(DType::f32, Shape{rows, 3 * C});
  w.qkv_parts = be.alloc(DType::f32, Shape{3 * rows, C});
  w.attn = be.alloc(act, Shape{rows, C});
  w.mid = be.alloc(DType::f32, Shape{rows * wide});
  w.act = be.alloc(act, Shape{rows * wide});
  w.rows = rows;
  return w;
}

Tensor VisionEncoder::encode(std::span<const vision::ProcessedImage* const> images) {
  std::vector<VisionGrid> grids;
  int64_t rows = 0;
  bool video = false;
  for (const auto* im : images) {
    grids.push_back({im->grid_t, im->grid_h, im->grid_w});
    rows += im->num_patches();
    video = video || im->is_video();
  }
  // A step with a video's temporal patches writes every row with all its frames (a still
  // image repeated, as HF does) and uses the unsummed kernel; otherwise one copy a row.
  const int64_t temporal = video ? config_.temporal_patch_size : 1;
  const int64_t row_len = config_.patch_values() * temporal;
  std::vector<float> patches(static_cast<size_t>(rows * row_len));
  int64_t at = 0;
  for (const auto* im : images) {
    const int64_t n = im->num_patches() * row_len;
    vision::write_patches(*im, processor_, temporal,
                          std::span<float>(patches).subspan(static_cast<size_t>(at), static_cast<size_t>(n)));
    at += n;
  }
  return encode_patches(patches, grids, temporal);
}

Tensor VisionEncoder::encode_patches(std::span<const float> patches, std::span<const VisionGrid> grids,
                                     int64_t temporal) {
  auto& be = *backend_;
  const auto& c = config_;
  const int64_t H = c.num_heads, d = c.head_dim(), I = c.intermediate_size, M = c.merged_hidden();
  if (temporal != 1 && temporal != c.temporal_patch_size)
    throw std::invalid_argument("VisionEncoder: patch rows of " + std::to_string(temporal) + " frames; the tower takes 1 or " +
                                std::to_string(c.temporal_patch_size));
  const int64_t row_len = c.patch_values() * temporal;
  int64_t N = 0;
  for (const VisionGrid& g : grids) N += g.patches();
  if (N == 0 || static_cast<int64_t>(patches.size()) != N * row_len)
    throw std::invalid_argument("VisionEncoder: " + std::to_string(patches.size()) + " patch values for " +
                                std::to_string(N) + " patches of " + std::to_string(row_len));
  const VisionPositions pos = vision_positions(grids, c);
  kernels::VisionBatchDesc desc;
  desc.segments = pos.segments;
  desc.pos_index = pos.pos_index;
  desc.pos_weight = pos.pos_weight;
  desc.pos_table_rows = c.num_position_embeddings;
  desc.rope_half = d / 2;
  desc.rope_cos = pos.rope_cos;
  desc.rope_sin = pos.rope_sin;
  const std::unique_ptr<kernels::VisionPlan> plan = be.plan_vision(desc);

  Workspace& ws = workspace(N);
  const VisionWeights& w = weights_;
  Tensor input = ws.input.rows(0, N * temporal).reshape(Shape{N, row_len});
  Tensor h = ws.h.rows(0, N), xn = ws.xn.rows(0, N), qkv = ws.qkv.rows(0, N);
  Tensor qkv_parts = ws.qkv_parts.rows(0, 3 * N), attn = ws.attn.rows(0, N);
  be.copy_from_host(patches, input);
  be.gemm_bias(input, temporal == 1 ? w.patch_w : w.patch_w_video, w.patch_b, h, false);
  be.add_position_embedding(w.pos_embed, *plan, h);

  const float eps = 1e-6f;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  const auto act_kind = c.act == VisionAct::gelu_tanh ? kernels::Backend::Gelu::tanh : kernels::Backend::Gelu::erf;
  Tensor mid = ws.mid.rows(0, N * I).reshape(Shape{N, I});
  Tensor act = ws.act.rows(0, N * I).reshape(Shape{N, I});
  for (const VisionBlockWeights& b : w.blocks) {
    be.layer_norm(h, b.norm1_w, b.norm1_b, eps, xn);
    be.gemm(xn, b.qkv_w, qkv, false);
    Tensor attn3 = attn.reshape(Shape{N, H, d});
    be.qkv_segment_attention(qkv, b.qkv_b, *plan, scale, qkv_parts, attn3);
    be.gemm_bias(attn, b.proj_w, b.proj_b, h, true);
    be.layer_norm(h, b.norm2_w, b.norm2_b, eps, xn);
    be.gemm_bias_gelu(xn, b.fc1_w, b.fc1_b, act_kind, mid, act);
    be.gemm_bias(act, b.fc2_w, b.fc2_b, h, true);
  }
  if (observer_) observer_(h);

  // Merger: each 2 x 2 block's rows are consecutive, so [N, C] viewed as [N / 4, 4C] is the
  // concatenation HF builds.
  const int64_t T = N / c.merge_unit();
  be.layer_norm(h, w.merger_norm_w, w.merger_norm_b, eps, xn);
  Tensor mid4 = ws.mid.rows(0, T * M).reshape(Shape{T, M});
  Tensor act4 = ws.act.rows(0, T * M).reshape(Shape{T, M});
  be.gemm_bias_gelu(xn.reshape(Shape{T, M}), w.merger_fc1_w, w.merger_fc1_b, kernels::Backend::Gelu::erf, mid4, act4);
  Tensor out = be.alloc(DType::f32, Shape{T, c.out_hidden_size});
  be.gemm_bias(act4, w.merger_fc2_w, w.merger_fc2_b, out, false);
  return out;
}

double VisionEncoder::flops(std::span<const VisionGrid> grids) const {
  const auto& c = config_;
  const double C = static_cast<double>(c.hidden_size), I = static_cast<double>(c.intermediate_size),
               M = static_cast<double>(c.merged_hidden()), out = static_cast<double>(c.out_hidden_size);
  double f = 0;
  for (const VisionGrid& g : grids) {
    const double n = static_cast<double>(g.patches()), seg = static_cast<double>(g.h * g.w);
    f += 2 * n * static_cast<double>(c.patch_values()) * C;  // the summed kernel (a video's rows: T times this)
    f += static_cast<double>(c.depth) * (2 * n * C * (3 * C + C + 2 * I) + 4 * n * seg * C);
    f += 2 * (n / static_cast<double>(c.merge_unit())) * M * (M + out);
  }
  return f;
}

}  // namespace ds::qwen35
