#include "model/qwen35/weights.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <span>
#include <stdexcept>
#include <utility>

namespace ds::qwen35 {

namespace {

using kernels::HostTensor;
using kernels::Shape;
using kernels::Tensor;

Shape to_shape(const std::vector<int64_t>& dims) {
  switch (dims.size()) {
    case 1: return Shape{dims[0]};
    case 2: return Shape{dims[0], dims[1]};
    case 3: return Shape{dims[0], dims[1], dims[2]};
    default: return Shape{};
  }
}

bool is_skipped(const std::string& name) {
  return name.rfind("model.visual.", 0) == 0 || name.rfind("mtp.", 0) == 0;
}

class Loader {
 public:
  Loader(kernels::Backend& backend, const Checkpoint& ckpt, std::string prefix)
      : backend_(backend), ckpt_(ckpt), prefix_(std::move(prefix)) {}

  const std::string& prefix() const { return prefix_; }

  // The checked host view of a tensor (full name).
  HostTensor host(const std::string& name, const std::vector<int64_t>& want) {
    const auto* e = ckpt_.find(name);
    if (!e) {
      std::string files;
      for (const auto& f : ckpt_.file_names()) files += (files.empty() ? "" : ", ") + f;
      throw std::runtime_error(ckpt_.dir().string() + ": tensor " + name + " is missing (looked in " +
                               files + ")");
    }
    const auto& info = *e->info;
    const std::string where = e->file->path().string() + ": tensor " + name;
    DType dtype;
    switch (info.dtype) {
      case StDType::f32: dtype = DType::f32; break;
      case StDType::bf16: dtype = DType::bf16; break;
      case StDType::f16: dtype = DType::f16; break;
      default:
        throw std::runtime_error(where + " has dtype " + dtype_name(info.dtype) +
                                 ", expected F32, BF16 or F16");
    }
    if (info.shape != want)
      throw std::runtime_error(where + " has shape " + shape_str(info.shape) + ", expected " +
                               shape_str(want) + " from config.json");
    used_.insert(name);
    return HostTensor{dtype, to_shape(want), info.data};
  }

  Tensor load(const std::string& name, const std::vector<int64_t>& want) {
    return backend_.upload(host(name, want));
  }

  // The rows of several weights with the same column count stacked into one, in order.
  Tensor load_stacked(const std::vector<std::pair<std::string, std::vector<int64_t>>>& parts) {
    std::vector<HostTensor> hs;
    int64_t rows = 0, bytes = 0;
    for (const auto& [name, want] : parts) {
      hs.push_back(host(name, want));
      rows += want[0];
      bytes += hs.back().bytes();
    }
    const Shape shape{rows, parts.front().second[1]};
    const bool same_type =
        std::all_of(hs.begin(), hs.end(), [&](const HostTensor& h) { return h.dtype == hs.front().dtype; });
    if (same_type) {
      std::vector<unsigned char> stacked(static_cast<size_t>(bytes));
      int64_t at = 0;
      for (const auto& h : hs) {
        std::memcpy(stacked.data() + at, h.data, static_cast<size_t>(h.bytes()));
        at += h.bytes();
      }
      return backend_.upload(HostTensor{hs.front().dtype, shape, stacked.data()});
    }
    // Mixed stored types: widen each part through the backend, then stack on the host.
    std::vector<float> all(static_cast<size_t>(shape.numel()));
    int64_t at = 0;
    for (const auto& h : hs) {
      const Tensor t = backend_.upload(h);
      backend_.copy_to_host(t, std::span<float>(all.data() + at, static_cast<size_t>(t.numel())));
      at += t.numel();
    }
    return backend_.upload(HostTensor{DType::f32, shape, all.data()});
  }

  // Every tensor that is neither skipped nor loaded is an error.
  void check_nothing_left() const {
    for (const auto& [name, e] : ckpt_.tensors())
      if (!is_skipped(name) && !used_.count(name))
        throw std::runtime_error(e.file->path().string() + ": unexpected tensor " + name +
                                 " (not part of the text decoder this config describes)");
  }

 private:
  kernels::Backend& backend_;
  const Checkpoint& ckpt_;
  std::string prefix_;
  std::set<std::string> used_;
};

}  // namespace

ModelWeights load_weights(kernels::Backend& backend, const Checkpoint& ckpt, const ModelConfig& c) {
  // The config says which layout to expect; a checkpoint saved in the other one is accepted
  // when its embedding is there and the expected one is not.
  std::string prefix = c.multimodal_layout ? "model.language_model." : "model.";
  const std::string other = c.multimodal_layout ? "model." : "model.language_model.";
  if (!ckpt.find(prefix + "embed_tokens.weight") && ckpt.find(other + "embed_tokens.weight")) prefix = other;
  Loader ld(backend, ckpt, prefix);

  const int64_t H = c.hidden_size, V = c.vocab_size, I = c.intermediate_size;
  const int64_t Nq = c.num_heads, Nkv = c.num_kv_heads, D = c.head_dim;
  const int64_t Hv = c.deltanet_v_heads, dv = c.deltanet_v_dim;

  ModelWeights w;
  w.embed = ld.load(prefix + "embed_tokens.weight", {V, H});
  w.final_norm = ld.load(prefix + "norm.weight", {H});
  if (ckpt.find("lm_head.weight") && !c.tie_word_embeddings) {
    w.lm_head = ld.load("lm_head.weight", {V, H});
  } else if (c.tie_word_embeddings) {
    // Tied: HF reuses the embedding even when a copy of lm_head was saved.
    if (ckpt.find("lm_head.weight")) ld.host("lm_head.weight", {V, H});
    w.lm_head = w.embed;
  } else {
    ld.load("lm_head.weight", {V, H});  // reports it missing
  }

  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = prefix + "layers." + std::to_string(i) + ".";
    LayerWeights L;
    L.kind = c.layer_kinds[static_cast<size_t>(i)];
    L.input_norm = ld.load(p + "input_layernorm.weight", {H});
    L.post_norm = ld.load(p + "post_attention_layernorm.weight", {H});
    if (L.kind == LayerKind::full_attention) {
      auto& a = L.attn;
      a.qkv_proj = ld.load_stacked({{p + "self_attn.q_proj.weight", {2 * Nq * D, H}},
                                    {p + "self_attn.k_proj.weight", {Nkv * D, H}},
                                    {p + "self_attn.v_proj.weight", {Nkv * D, H}}});
      a.o_proj = ld.load(p + "self_attn.o_proj.weight", {H, Nq * D});
      a.q_norm = ld.load(p + "self_attn.q_norm.weight", {D});
      a.k_norm = ld.load(p + "self_attn.k_norm.weight", {D});
    } else {
      auto& g = L.deltanet;
      g.in_proj = ld.load_stacked({{p + "linear_attn.in_proj_qkv.weight", {c.conv_dim(), H}},
                                   {p + "linear_attn.in_proj_z.weight", {Hv * dv, H}},
                                   {p + "linear_attn.in_proj_b.weight", {Hv, H}},
                                   {p + "linear_attn.in_proj_a.weight", {Hv, H}}});
      g.conv1d = ld.load(p + "linear_attn.conv1d.weight", {c.conv_dim(), 1, c.conv_kernel});
      g.dt_bias = ld.load(p + "linear_attn.dt_bias", {Hv});
      g.a_log = ld.load(p + "linear_attn.A_log", {Hv});
      g.norm = ld.load(p + "linear_attn.norm.weight", {dv});
      g.out_proj = ld.load(p + "linear_attn.out_proj.weight", {H, Hv * dv});
    }
    L.gate_up = ld.load_stacked({{p + "mlp.gate_proj.weight", {I, H}}, {p + "mlp.up_proj.weight", {I, H}}});
    L.down = ld.load(p + "mlp.down_proj.weight", {H, I});
    w.layers.push_back(std::move(L));
  }
  ld.check_nothing_left();
  return w;
}

}  // namespace ds::qwen35
