#include "model/qwen35/vision_weights.h"

#include <cmath>
#include <cstring>
#include <set>
#include <stdexcept>
#include <string>

#include "model/qwen35/fp8.h"

namespace ds::qwen35 {
namespace {

using kernels::HostTensor;
using kernels::Shape;
using kernels::Tensor;

// bf16 is the top half of an f32.
float bf16_to_f32(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

float half_to_f32(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 31, man = h & 1023;
  float v = exp == 0 ? std::ldexp(static_cast<float>(man), -24)
                     : exp == 31 ? (man ? NAN : INFINITY) : std::ldexp(static_cast<float>(man + 1024), exp - 25);
  return sign ? -v : v;
}

Shape to_shape(const std::vector<int64_t>& d) {
  switch (d.size()) {
    case 1: return Shape{d[0]};
    case 2: return Shape{d[0], d[1]};
    default: return Shape{};
  }
}

class VisionLoader {
 public:
  VisionLoader(kernels::Backend& be, const Checkpoint& ckpt) : be_(be), ckpt_(ckpt) {}

  // The tensor's values in f32 (host), checked against `want`.
  std::vector<float> values(const std::string& name, const std::vector<int64_t>& want) {
    const auto* e = ckpt_.find(name);
    if (!e) throw std::runtime_error(ckpt_.dir().string() + ": tensor " + name + " of the vision tower is missing");
    const auto& info = *e->info;
    const std::string where = e->file->path().string() + ": tensor " + name;
    if (info.shape != want)
      throw std::runtime_error(where + " has shape " + shape_str(info.shape) + ", expected " + shape_str(want) +
                               " from config.json's vision_config");
    used_.insert(name);
    const size_t n = static_cast<size_t>(info.numel());
    std::vector<float> out(n);
    const auto* p = static_cast<const unsigned char*>(info.data);  // not necessarily aligned
    switch (info.dtype) {
      case StDType::f32: std::memcpy(out.data(), p, n * 4); break;
      case StDType::bf16:
        for (size_t i = 0; i < n; ++i) {
          uint16_t h;
          std::memcpy(&h, p + 2 * i, 2);
          const uint32_t bits = static_cast<uint32_t>(h) << 16;
          std::memcpy(&out[i], &bits, 4);
        }
        break;
      case StDType::f16:
        for (size_t i = 0; i < n; ++i) {
          uint16_t h;
          std::memcpy(&h, p + 2 * i, 2);
          out[i] = half_to_f32(h);
        }
        break;
      case StDType::f8_e4m3: {
        const std::string scale_name = name + "_scale_inv";
        const auto* s = ckpt_.find(scale_name);
        if (!s || want.size() != 2)
          throw std::runtime_error(where + " is stored as F8_E4M3 without its scale " + scale_name);
        const fp8::BlockShape bs{want[0], want[1]};
        // F32 scales, or BF16 as Qwen's FP8 releases store them (exact in f32).
        const bool f32 = s->info->dtype == StDType::f32;
        if (s->info->shape != std::vector<int64_t>{bs.scale_rows(), bs.scale_cols()} ||
            (!f32 && s->info->dtype != StDType::bf16))
          throw std::runtime_error(where + ": its scale " + scale_name + " is not F32 or BF16 " +
                                   shape_str({bs.scale_rows(), bs.scale_cols()}));
        used_.insert(scale_name);
        std::vector<float> scales(static_cast<size_t>(s->info->numel()));
        const auto* sp = static_cast<const unsigned char*>(s->info->data);
        for (size_t i = 0; i < scales.size(); ++i) {
          if (f32) {
            std::memcpy(&scales[i], sp + 4 * i, 4);
          } else {
            uint16_t h;
            std::memcpy(&h, sp + 2 * i, 2);
            scales[i] = bf16_to_f32(h);
          }
        }
        out = fp8::dequantize(bs, {static_cast<const uint8_t*>(info.data), n}, scales);
        break;
      }
      default:
        throw std::runtime_error(where + " has dtype " + dtype_name(info.dtype) + ", expected F32, BF16 or F16");
    }
    return out;
  }

  Tensor load(const std::string& name, const std::vector<int64_t>& want) { return upload(values(name, want), want); }

  Tensor upload(const std::vector<float>& v, const std::vector<int64_t>& shape) {
    Tensor t = be_.upload(HostTensor{DType::f32, to_shape(shape), v.data()});
    bytes_ += t.bytes();
    return t;
  }

  void check_nothing_left() const {
    for (const auto& [name, e] : ckpt_.tensors()) {
      if (name.rfind("model.visual.", 0) != 0 || used_.count(name)) continue;
      throw std::runtime_error(e.file->path().string() + ": tensor " + name +
                               " is not part of the vision tower config.json describes");
    }
  }
  int64_t bytes() const { return bytes_; }

 private:
  kernels::Backend& be_;
  const Checkpoint& ckpt_;
  std::set<std::string> used_;
  int64_t bytes_ = 0;
};

}  // namespace

VisionWeights load_vision_weights(kernels::Backend& backend, const Checkpoint& ckpt, const VisionConfig& c) {
  VisionLoader ld(backend, ckpt);
  const std::string p = "model.visual.";
  const int64_t C = c.hidden_size, I = c.intermediate_size, P = c.patch_size, T = c.temporal_patch_size,
                M = c.merged_hidden();
  VisionWeights w;
  {
    // [C, 3, T, P, P] -> [C, 3, P, P] summed over T (see the header).
    const std::vector<float> conv = ld.values(p + "patch_embed.proj.weight", {C, 3, T, P, P});
    const int64_t pp = P * P;
    std::vector<float> sum(static_cast<size_t>(C * 3 * pp), 0.0f);
    for (int64_t o = 0; o < C; ++o)
      for (int64_t ch = 0; ch < 3; ++ch)
        for (int64_t t = 0; t < T; ++t)
          for (int64_t i = 0; i < pp; ++i)
            sum[static_cast<size_t>((o * 3 + ch) * pp + i)] += conv[static_cast<size_t>(((o * 3 + ch) * T + t) * pp + i)];
    w.patch_w = ld.upload(sum, {C, 3 * pp});
    w.patch_w_video = ld.upload(conv, {C, 3 * T * pp});
  }
  w.patch_b = ld.load(p + "patch_embed.proj.bias", {C});
  w.pos_embed = ld.load(p + "pos_embed.weight", {c.num_position_embeddings, C});
  for (int64_t i = 0; i < c.depth; ++i) {
    const std::string b = p + "blocks." + std::to_string(i) + ".";
    VisionBlockWeights k;
    k.norm1_w = ld.load(b + "norm1.weight", {C});
    k.norm1_b = ld.load(b + "norm1.bias", {C});
    k.qkv_w = ld.load(b + "attn.qkv.weight", {3 * C, C});
    k.qkv_b = ld.load(b + "attn.qkv.bias", {3 * C});
    k.proj_w = ld.load(b + "attn.proj.weight", {C, C});
    k.proj_b = ld.load(b + "attn.proj.bias", {C});
    k.norm2_w = ld.load(b + "norm2.weight", {C});
    k.norm2_b = ld.load(b + "norm2.bias", {C});
    k.fc1_w = ld.load(b + "mlp.linear_fc1.weight", {I, C});
    k.fc1_b = ld.load(b + "mlp.linear_fc1.bias", {I});
    k.fc2_w = ld.load(b + "mlp.linear_fc2.weight", {C, I});
    k.fc2_b = ld.load(b + "mlp.linear_fc2.bias", {C});
    w.blocks.push_back(std::move(k));
  }
  w.merger_norm_w = ld.load(p + "merger.norm.weight", {C});
  w.merger_norm_b = ld.load(p + "merger.norm.bias", {C});
  w.merger_fc1_w = ld.load(p + "merger.linear_fc1.weight", {M, M});
  w.merger_fc1_b = ld.load(p + "merger.linear_fc1.bias", {M});
  w.merger_fc2_w = ld.load(p + "merger.linear_fc2.weight", {c.out_hidden_size, M});
  w.merger_fc2_b = ld.load(p + "merger.linear_fc2.bias", {c.out_hidden_size});
  ld.check_nothing_left();
  w.bytes = ld.bytes();
  return w;
}

}  // namespace ds::qwen35
