#include "model/qwen35/weights.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <optional>
#include <set>
#include <span>
#include <stdexcept>
#include <utility>

#include "model/qwen35/fp8.h"
#include "model/qwen35/int4.h"

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

// Element i of a bf16 array that need not be 2-byte aligned in its file; bf16 is the top half
// of an f32.
float bf16_at(const unsigned char* p, size_t i) {
  uint16_t half;
  std::memcpy(&half, p + 2 * i, 2);
  const uint32_t bits = static_cast<uint32_t>(half) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

bool is_skipped(const std::string& name, bool mtp_loaded) {
  return name.rfind("model.visual.", 0) == 0 || (!mtp_loaded && name.rfind("mtp.", 0) == 0);
}

// Whether --quantization fp8 quantises a weight: the linear layers an FP8 release quantises.
enum class Fp8Target : bool { no, yes };

class Loader {
 public:
  Loader(kernels::Backend& backend, const Checkpoint& ckpt, std::string prefix, const ModelConfig& config,
         const LoadOptions& options)
      : backend_(backend), ckpt_(ckpt), prefix_(std::move(prefix)), fp8_(config.fp8), int4_(config.int4),
        // An FP8 checkpoint is loaded as stored: its unquantised weights stay so on purpose.
        quantize_(options.quantization == Quantization::fp8 && !config.fp8), mtp_(options.mtp) {}

  const std::string& prefix() const { return prefix_; }

  // The checked host view of a tensor (full name). Values computed on the host (dequantised
  // FP8) live in scratch_ until the next upload.
  HostTensor host(const std::string& name, const std::vector<int64_t>& want, Fp8Target target = Fp8Target::no) {
    const auto* e = ckpt_.find(name);
    if (!e && is_int4(name)) return int4_weight(module_of(name), want);
    if (!e) {
      std::string files;
      for (const auto& f : ckpt_.file_names()) files += (files.empty() ? "" : ", ") + f;
      throw std::runtime_error(ckpt_.dir().string() + ": tensor " + name + " is missing (looked in " +
                               files + ")");
    }
    const auto& info = *e->info;
    const std::string where = e->file->path().string() + ": tensor " + name;
    if (info.shape != want)
      throw std::runtime_error(where + " has shape " + shape_str(info.shape) + ", expected " +
                               shape_str(want) + " from config.json");
    const std::string scale_name = name + "_scale_inv";
    const Checkpoint::Entry* scale = ckpt_.find(scale_name);
    if (info.dtype == StDType::f8_e4m3) return fp8_weight(*e, where, want, scale_name, scale);
    if (scale)
      throw std::runtime_error(where + " is stored as " + dtype_name(info.dtype) + " but has a scale " +
                               scale_name + " (only F8_E4M3 weights have one)");
    DType dtype;
    switch (info.dtype) {
      case StDType::f32: dtype = DType::f32; break;
      case StDType::bf16: dtype = DType::bf16; break;
      case StDType::f16: dtype = DType::f16; break;
      default:
        throw std::runtime_error(where + " has dtype " + dtype_name(info.dtype) +
                                 ", expected F32, BF16 or F16");
    }
    used_.insert(name);
    const HostTensor stored{dtype, to_shape(want), info.data};
    if (quantize_ && target == Fp8Target::yes) return quantized(stored, want);
    return stored;
  }

  // Whether the checkpoint holds the weight `name`, in whatever form.
  bool has(const std::string& name) const { return ckpt_.find(name) || is_int4(name); }

  // Whether name ("X.weight") is stored as GPTQ / AWQ tensors (X.qweight ...) instead.
  bool is_int4(const std::string& name) const {
    return name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0 && int4::stored(ckpt_, module_of(name));
  }
  static std::string module_of(const std::string& name) { return name.substr(0, name.size() - 7); }

  // A GPTQ / AWQ weight: the codes and groups where the backend keeps 4-bit weights, else
  // the values.
  HostTensor int4_weight(const std::string& module, const std::vector<int64_t>& want) {
    const std::string where = ckpt_.dir().string() + ": tensor " + module + ".qweight";
    if (!int4_)
      throw std::runtime_error(where + " is stored as a GPTQ / AWQ weight but config.json has no gptq or awq "
                               "quantization_config");
    if (want.size() != 2) throw std::runtime_error(where + " is stored 4-bit, which only 2-D weights may be");
    int4_scratch_.push_back(int4::read(ckpt_, module, *int4_, want[0], want[1], used_));
    const HostTensor h = int4_scratch_.back().host();
    return backend_.int4_weights() ? h : values(h);
  }

  // W = decode(codes) * scale per block, in f32.
  HostTensor fp8_weight(const Checkpoint::Entry& e, const std::string& where, const std::vector<int64_t>& want,
                        const std::string& scale_name, const Checkpoint::Entry* scale) {
    if (!fp8_)
      throw std::runtime_error(where + " is stored as F8_E4M3 but config.json has no fp8 quantization_config");
    if (want.size() != 2) throw std::runtime_error(where + " is stored as F8_E4M3, which only 2-D weights may be");
    if (!scale) throw std::runtime_error(where + " is stored as F8_E4M3 but its scale " + scale_name + " is missing");
    const fp8::BlockShape bs{want[0], want[1], fp8_->block_rows, fp8_->block_cols};
    const auto& si = *scale->info;
    const std::string scale_where = scale->file->path().string() + ": tensor " + scale_name;
    const std::vector<int64_t> scale_shape{bs.scale_rows(), bs.scale_cols()};
    if (si.shape != scale_shape)
      throw std::runtime_error(scale_where + " has shape " + shape_str(si.shape) + ", expected " +
                               shape_str(scale_shape) + " (one scale per " + std::to_string(bs.block_rows) + "x" +
                               std::to_string(bs.block_cols) + " block of " + shape_str(want) + ")");
    std::vector<float> scales(static_cast<size_t>(si.numel()));
    if (si.dtype == StDType::f32) {
      std::memcpy(scales.data(), si.data, si.bytes);
    } else if (si.dtype == StDType::bf16) {
      const auto* h = static_cast<const unsigned char*>(si.data);  // tensors need not be aligned
      for (size_t i = 0; i < scales.size(); ++i) scales[i] = bf16_at(h, i);
    } else {
      throw std::runtime_error(scale_where + " has dtype " + dtype_name(si.dtype) + ", expected F32 or BF16");
    }
    used_.insert(e.info->name);
    used_.insert(scale_name);
    scratch_.push_back(std::move(scales));
    return values_or_codes(bs, static_cast<const uint8_t*>(e.info->data), scratch_.back());
  }

  // An FP8 weight as the backend takes it: codes and scales where it keeps FP8 weights (the
  // kernels' blocks are 128 x 128, which is all config.json may declare), else the values.
  HostTensor values_or_codes(const fp8::BlockShape& bs, const uint8_t* codes, const std::vector<float>& scales) {
    const Shape shape{bs.rows, bs.cols};
    if (backend_.fp8_weights() && bs.block_rows == fp8::kBlock && bs.block_cols == fp8::kBlock)
      return HostTensor{DType::fp8_e4m3, shape, codes, kernels::Fp8Scales{scales.data(), bs.scale_cols()}};
    scratch_.push_back(fp8::dequantize(bs, {codes, static_cast<size_t>(shape.numel())}, scales));
    return HostTensor{DType::f32, shape, scratch_.back().data()};
  }

  // The values of a quantised host tensor (for a stack that mixes it with unquantised parts,
  // or a weight that is only used as values).
  HostTensor values(const HostTensor& h) {
    if (h.dtype == DType::int4) {
      scratch_.push_back(int4::dequantize(h));
      return HostTensor{DType::f32, h.shape, scratch_.back().data()};
    }
    if (h.dtype != DType::fp8_e4m3) return h;
    const fp8::BlockShape bs{h.shape[0], h.shape[1], fp8::kBlock, fp8::kBlock};
    const auto* codes = static_cast<const uint8_t*>(h.data);
    const std::span<const float> scales(h.scales.data, static_cast<size_t>(bs.scale_rows() * bs.scale_cols()));
    scratch_.push_back(fp8::dequantize(bs, {codes, static_cast<size_t>(h.shape.numel())}, scales));
    return HostTensor{DType::f32, h.shape, scratch_.back().data()};
  }

  // --quantization fp8: the stored values through one FP8 round trip, as an FP8 checkpoint of
  // them would load.
  HostTensor quantized(const HostTensor& stored, const std::vector<int64_t>& want) {
    std::vector<float> values(static_cast<size_t>(stored.shape.numel()));
    if (stored.dtype == DType::f32) {
      std::memcpy(values.data(), stored.data, values.size() * 4);
    } else if (stored.dtype == DType::bf16) {
      // Widened on the host threads (the tensor need not be 2-byte aligned in its file).
      const auto* src = static_cast<const unsigned char*>(stored.data);
      fp8::for_ranges(static_cast<int64_t>(values.size()), int64_t{1} << 20, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) values[static_cast<size_t>(i)] = bf16_at(src, static_cast<size_t>(i));
      });
    } else {
      // Widened by the backend, as load_stacked does for mixed types (exact for bf16).
      backend_.copy_to_host(backend_.upload(stored), values);
    }
    const fp8::BlockShape bs{want[0], want[1], fp8::kBlock, fp8::kBlock};
    fp8::Quantized q = fp8::quantize(bs, values);
    code_scratch_.push_back(std::move(q.codes));
    scratch_.push_back(std::move(q.scales));
    return values_or_codes(bs, code_scratch_.back().data(), scratch_.back());
  }

  // Values computed here from host() views (then scratch_ is released).
  Tensor upload(const HostTensor& h) {
    Tensor t = backend_.upload(h);
    clear_scratch();
    return t;
  }

  Tensor load(const std::string& name, const std::vector<int64_t>& want, Fp8Target target = Fp8Target::no) {
    Tensor t = backend_.upload(host(name, want, target));
    clear_scratch();
    return t;
  }

  // The rows of several weights with the same column count stacked into one, in order.
  struct Part {
    std::string name;
    std::vector<int64_t> shape;
    Fp8Target target = Fp8Target::no;
  };
  Tensor load_stacked(const std::vector<Part>& parts) {
    Tensor t = stack(parts);
    clear_scratch();
    return t;
  }

  Tensor stack(const std::vector<Part>& parts) {
    std::vector<HostTensor> hs;
    int64_t rows = 0;
    for (const auto& [name, want, target] : parts) {
      hs.push_back(host(name, want, target));
      rows += want[0];
    }
    const Shape shape{rows, parts.front().shape[1]};
    const auto fp8_part = [](const HostTensor& h) { return h.dtype == DType::fp8_e4m3; };
    const auto quantized = [](const HostTensor& h) { return h.dtype == DType::fp8_e4m3 || h.dtype == DType::int4; };
    if (std::all_of(hs.begin(), hs.end(), fp8_part)) return stack_fp8(hs, shape);
    if (int4::stackable(hs)) {
      int4_scratch_.push_back(int4::stack(hs));
      return backend_.upload(int4_scratch_.back().host());
    }
    if (std::any_of(hs.begin(), hs.end(), quantized))
      for (auto& h : hs) h = values(h);  // quantised beside other parts: stacked as values
    const bool same_type =
        std::all_of(hs.begin(), hs.end(), [&](const HostTensor& h) { return h.dtype == hs.front().dtype; });
    if (same_type) {
      int64_t bytes = 0;
      for (const auto& h : hs) bytes += h.bytes();
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

  // FP8 parts stay FP8: codes one after the other; the scales keep their 128 x 128 blocks
  // when every part but the last fills whole blocks of rows (the real models' projections),
  // else one row of scales per weight row (Fp8Scales::row_shift 0).
  Tensor stack_fp8(const std::vector<HostTensor>& hs, const Shape& shape) {
    const int64_t cols = hs.front().scales.cols;
    bool blocks = true;
    for (size_t i = 0; i + 1 < hs.size(); ++i) blocks = blocks && hs[i].shape[0] % fp8::kBlock == 0;
    std::vector<uint8_t> codes;
    std::vector<float> scales;
    codes.reserve(static_cast<size_t>(shape.numel()));
    for (const auto& h : hs) {
      const auto* c = static_cast<const uint8_t*>(h.data);
      codes.insert(codes.end(), c, c + h.shape.numel());
      const int64_t n = h.shape[0];
      if (blocks) {
        scales.insert(scales.end(), h.scales.data, h.scales.data + h.scales.rows_for(n) * cols);
      } else {
        for (int64_t r = 0; r < n; ++r) {
          const float* row = h.scales.data + (r >> h.scales.row_shift) * cols;
          scales.insert(scales.end(), row, row + cols);
        }
      }
    }
    const kernels::Fp8Scales fs{scales.data(), cols, blocks ? kernels::Fp8Scales::kBlockRowShift : 0};
    return backend_.upload(HostTensor{DType::fp8_e4m3, shape, codes.data(), fs});
  }

  void clear_scratch() {
    scratch_.clear();
    code_scratch_.clear();
    int4_scratch_.clear();
  }

  // Whether a weight reaches the backend quantised: stored FP8 (or made FP8 by --quantization
  // fp8) where the backend keeps FP8 weights, stored 4-bit where it keeps 4-bit ones.
  bool stays_quantized(const Part& p) const {
    if (const auto* e = ckpt_.find(p.name)) {
      if (e->info->dtype == StDType::f8_e4m3) return backend_.fp8_weights();
      return quantize_ && p.target == Fp8Target::yes && backend_.fp8_weights();
    }
    return is_int4(p.name) && backend_.int4_weights();
  }

  // Every tensor that is neither skipped nor loaded is an error.
  void check_nothing_left() const {
    for (const auto& [name, e] : ckpt_.tensors())
      if (!is_skipped(name, mtp_) && !used_.count(name))
        throw std::runtime_error(e.file->path().string() + ": unexpected tensor " + name +
                                 " (not part of the text decoder this config describes)");
  }

 private:
  kernels::Backend& backend_;
  const Checkpoint& ckpt_;
  std::string prefix_;
  std::optional<Fp8Config> fp8_;
  std::optional<Int4Config> int4_;
  bool quantize_;
  bool mtp_;
  std::set<std::string> used_;
  std::deque<std::vector<float>> scratch_;  // deque: earlier buffers stay put
  std::deque<std::vector<uint8_t>> code_scratch_;
  std::deque<int4::Weight> int4_scratch_;
};

// One decoder layer under prefix p ("model.layers.3.", "mtp.layers.0.").
LayerWeights load_layer(Loader& ld, const std::string& p, LayerKind kind, const ModelConfig& c) {
  constexpr Fp8Target linear = Fp8Target::yes;
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  const int64_t Nq = c.num_heads, Nkv = c.num_kv_heads, D = c.head_dim;
  const int64_t Hv = c.deltanet_v_heads, dv = c.deltanet_v_dim;
  LayerWeights L;
  L.kind = kind;
  L.input_norm = ld.load(p + "input_layernorm.weight", {H});
  L.post_norm = ld.load(p + "post_attention_layernorm.weight", {H});
  if (L.kind == LayerKind::full_attention) {
    auto& a = L.attn;
    a.qkv_proj = ld.load_stacked({{p + "self_attn.q_proj.weight", {2 * Nq * D, H}, linear},
                                  {p + "self_attn.k_proj.weight", {Nkv * D, H}, linear},
                                  {p + "self_attn.v_proj.weight", {Nkv * D, H}, linear}});
    a.o_proj = ld.load(p + "self_attn.o_proj.weight", {H, Nq * D}, linear);
    a.q_norm = ld.load(p + "self_attn.q_norm.weight", {D});
    a.k_norm = ld.load(p + "self_attn.k_norm.weight", {D});
  } else {
    auto& g = L.deltanet;
    const Loader::Part qkv{p + "linear_attn.in_proj_qkv.weight", {c.conv_dim(), H}, linear};
    const Loader::Part z{p + "linear_attn.in_proj_z.weight", {Hv * dv, H}, linear};
    const Loader::Part b{p + "linear_attn.in_proj_b.weight", {Hv, H}};
    const Loader::Part a{p + "linear_attn.in_proj_a.weight", {Hv, H}};
    if (ld.stays_quantized(qkv) || ld.stays_quantized(z)) {
      g.in_proj = ld.load_stacked({qkv, z});
      g.in_proj_ba = ld.load_stacked({b, a});
    } else {
      g.in_proj = ld.load_stacked({qkv, z, b, a});
    }
    g.conv1d = ld.load(p + "linear_attn.conv1d.weight", {c.conv_dim(), 1, c.conv_kernel});
    g.dt_bias = ld.load(p + "linear_attn.dt_bias", {Hv});
    g.a_log = ld.load(p + "linear_attn.A_log", {Hv});
    g.norm = ld.load(p + "linear_attn.norm.weight", {dv});
    g.out_proj = ld.load(p + "linear_attn.out_proj.weight", {H, Hv * dv}, linear);
  }
  L.gate_up = ld.load_stacked({{p + "mlp.gate_proj.weight", {I, H}, linear}, {p + "mlp.up_proj.weight", {I, H}, linear}});
  L.down = ld.load(p + "mlp.down_proj.weight", {H, I}, linear);
  return L;
}

// lm_head's rows of `ids` in their order (MtpWeights::draft_head): one copy per run of
// consecutive ids, so a map sorted by id costs a few copies.
kernels::Tensor gather_draft_head(kernels::Backend& be, const kernels::Tensor& lm_head, std::span<const int32_t> ids,
                                  int64_t V) {
  for (const int32_t id : ids)
    if (id < 0 || id >= V)
      throw std::runtime_error("MTP draft token map: token id " + std::to_string(id) + " is outside the vocabulary of " +
                               std::to_string(V));
  if (lm_head.dtype() == DType::fp8_e4m3 || lm_head.dtype() == DType::int4)
    throw std::runtime_error("MTP draft token map: lm_head is quantised (" + std::string(dtype_name(lm_head.dtype())) +
                             "), whose rows cannot be gathered; use draft_vocab_size");
  const auto n = static_cast<int64_t>(ids.size());
  kernels::Tensor head = be.alloc(lm_head.dtype(), Shape{n, lm_head.dim(1)});
  for (int64_t i = 0; i < n;) {
    int64_t run = 1;
    while (i + run < n && ids[static_cast<size_t>(i + run)] == ids[static_cast<size_t>(i)] + run) ++run;
    kernels::Tensor dst = head.rows(i, run);
    be.copy(lm_head.rows(ids[static_cast<size_t>(i)], run), dst);
    i += run;
  }
  return head;
}

// The MTP module (mtp.*), refused with a clear message when the checkpoint has none.
MtpWeights load_mtp(Loader& ld, const Checkpoint& ckpt, const ModelConfig& c) {
  const std::string who = ckpt.dir().string() + ": speculative method \"mtp\" needs the checkpoint's MTP module";
  if (c.mtp_layers < 1 || !ld.has("mtp.fc.weight"))
    throw std::runtime_error(who + " (config.json's mtp_num_hidden_layers and the mtp.* tensors), and this one has " +
                             (c.mtp_layers < 1 ? "no mtp_num_hidden_layers" : "no mtp.fc.weight") +
                             "; use a released Qwen3.5/3.6 checkpoint or another method (\"ngram\")");
  if (c.mtp_layers != 1)
    throw std::runtime_error(who + ": mtp_num_hidden_layers is " + std::to_string(c.mtp_layers) +
                             ", and only 1 (every released checkpoint's) is supported");
  const int64_t H = c.hidden_size;
  MtpWeights m;
  m.pre_fc_norm_embedding = ld.load("mtp.pre_fc_norm_embedding.weight", {H});
  m.pre_fc_norm_hidden = ld.load("mtp.pre_fc_norm_hidden.weight", {H});
  // fc [H, 2H]: each row's first H values read the embedding, the next H the hidden state.
  // (As values: its halves are cut by rows of bytes, which FP8 block scales would not follow.)
  const kernels::HostTensor fc = ld.values(ld.host("mtp.fc.weight", {H, 2 * H}));
  const int64_t half = ds::row_bytes(fc.dtype, H);
  std::vector<unsigned char> parts[2];
  for (auto& part : parts) part.resize(static_cast<size_t>(half * H));
  const auto* src = static_cast<const unsigned char*>(fc.data);
  for (int64_t r = 0; r < H; ++r)
    for (int k = 0; k < 2; ++k)
      std::memcpy(parts[k].data() + r * half, src + (2 * r + k) * half, static_cast<size_t>(half));
  m.fc_embedding = ld.upload({fc.dtype, Shape{H, H}, parts[0].data()});
  m.fc_hidden = ld.upload({fc.dtype, Shape{H, H}, parts[1].data()});
  m.layer = load_layer(ld, "mtp.layers.0.", LayerKind::full_attention, c);
  m.norm = ld.load("mtp.norm.weight", {H});
  return m;
}

// serve --quantization against what the checkpoint is.
void check_quantization(const Checkpoint& ckpt, const ModelConfig& c, const LoadOptions& options) {
  const std::string is = c.int4 ? std::string(c.int4->method == Int4Method::gptq ? "a gptq" : "an awq") + " checkpoint"
                         : c.fp8 ? std::string("an fp8 checkpoint")
                                 : std::string("not quantised (config.json has no quantization_config)");
  const std::string who = ckpt.dir().string() + ": --quantization ";
  switch (options.quantization) {
    case Quantization::none: return;
    case Quantization::fp8:
      if (c.int4) throw std::runtime_error(who + "fp8 cannot quantise " + is + " again (drop the flag: it loads as stored)");
      return;
    case Quantization::gptq:
    case Quantization::awq: {
      const Int4Method want = options.quantization == Quantization::gptq ? Int4Method::gptq : Int4Method::awq;
      if (!c.int4 || c.int4->method != want)
        throw std::runtime_error(who + (want == Int4Method::gptq ? "gptq" : "awq") + " loads " +
                                 (want == Int4Method::gptq ? "GPTQ" : "AWQ") + " checkpoints as released, and this one is " +
                                 is + "; 4-bit weights are not made at load");
      return;
    }
  }
}

}  // namespace

Quantization parse_quantization(std::string_view s) {
  if (s == "none") return Quantization::none;
  if (s == "fp8") return Quantization::fp8;
  if (s == "gptq") return Quantization::gptq;
  if (s == "awq") return Quantization::awq;
  throw std::invalid_argument("--quantization must be none, fp8, gptq or awq, got '" + std::string(s) + "'");
}

ModelWeights load_weights(kernels::Backend& backend, const Checkpoint& ckpt, const ModelConfig& c,
                          const LoadOptions& options) {
  // The config says which layout to expect; a checkpoint saved in the other one is accepted
  // when its embedding is there and the expected one is not.
  std::string prefix = c.multimodal_layout ? "model.language_model." : "model.";
  const std::string other = c.multimodal_layout ? "model." : "model.language_model.";
  if (!ckpt.find(prefix + "embed_tokens.weight") && ckpt.find(other + "embed_tokens.weight")) prefix = other;
  check_quantization(ckpt, c, options);
  Loader ld(backend, ckpt, prefix, c, options);
  const int64_t H = c.hidden_size, V = c.vocab_size;

  ModelWeights w;
  // As values: the embedding op gathers rows of values.
  w.embed = ld.upload(ld.values(ld.host(prefix + "embed_tokens.weight", {V, H})));
  w.final_norm = ld.load(prefix + "norm.weight", {H});
  if (ld.has("lm_head.weight") && !c.tie_word_embeddings) {
    w.lm_head = ld.load("lm_head.weight", {V, H});
  } else if (c.tie_word_embeddings) {
    // Tied: HF reuses the embedding even when a copy of lm_head was saved.
    if (ld.has("lm_head.weight")) ld.host("lm_head.weight", {V, H});
    w.lm_head = w.embed;
  } else {
    ld.load("lm_head.weight", {V, H});  // reports it missing
  }

  for (int64_t i = 0; i < c.num_layers; ++i)
    w.layers.push_back(load_layer(ld, prefix + "layers." + std::to_string(i) + ".", c.layer_kinds[static_cast<size_t>(i)], c));
  if (options.mtp) w.mtp = load_mtp(ld, ckpt, c);
  if (w.mtp && !options.mtp_draft_tokens.empty())
    w.mtp->draft_head = gather_draft_head(backend, w.lm_head, options.mtp_draft_tokens, V);
  ld.check_nothing_left();
  return w;
}

}  // namespace ds::qwen35
