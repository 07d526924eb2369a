#include "model/qwen35/lora_adapter.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <tuple>


namespace ds::qwen35 {

namespace {

constexpr const char* kTargetNames[kNumLoraTargets] = {
    "q_proj", "k_proj", "v_proj", "o_proj", "in_proj_qkv", "in_proj_z",
    "in_proj_b", "in_proj_a", "out_proj", "gate_proj", "up_proj", "down_proj"};

// A module name of a checkpoint key: the target it adapts and, for a split piece of
// in_proj_qkv, which rows of it.
struct Piece {
  LoraTarget target;
  int piece = -1;  // -1: the whole target; 0, 1, 2: in_proj_q, _k, _v
  const char* group;
};

const Piece* find_piece(std::string_view group, std::string_view module) {
  static const std::vector<std::pair<std::string, Piece>> pieces = {
      {"q_proj", {LoraTarget::q_proj, -1, "self_attn"}},
      {"k_proj", {LoraTarget::k_proj, -1, "self_attn"}},
      {"v_proj", {LoraTarget::v_proj, -1, "self_attn"}},
      {"o_proj", {LoraTarget::o_proj, -1, "self_attn"}},
      {"in_proj_qkv", {LoraTarget::in_proj_qkv, -1, "linear_attn"}},
      {"in_proj_q", {LoraTarget::in_proj_qkv, 0, "linear_attn"}},
      {"in_proj_k", {LoraTarget::in_proj_qkv, 1, "linear_attn"}},
      {"in_proj_v", {LoraTarget::in_proj_qkv, 2, "linear_attn"}},
      {"in_proj_z", {LoraTarget::in_proj_z, -1, "linear_attn"}},
      {"in_proj_b", {LoraTarget::in_proj_b, -1, "linear_attn"}},
      {"in_proj_a", {LoraTarget::in_proj_a, -1, "linear_attn"}},
      {"out_proj", {LoraTarget::out_proj, -1, "linear_attn"}},
      {"gate_proj", {LoraTarget::gate_proj, -1, "mlp"}},
      {"up_proj", {LoraTarget::up_proj, -1, "mlp"}},
      {"down_proj", {LoraTarget::down_proj, -1, "mlp"}},
  };
  for (const auto& [name, p] : pieces)
    if (module == name && group == p.group) return &p;
  return nullptr;
}

// A target_modules entry's last component ("model.layers.0.mlp.up_proj" -> "up_proj").
std::string_view module_leaf(std::string_view m) {
  const size_t dot = m.rfind('.');
  return dot == std::string_view::npos ? m : m.substr(dot + 1);
}

// Module names of the vision tower and its merger (model.visual.*), which PEFT's "all-linear"
// lists beside the language model's.
bool tower_module_name(std::string_view m) {
  m = module_leaf(m);
  for (const char* t : {"qkv", "proj", "linear_fc1", "linear_fc2"})
    if (m == t) return true;
  return false;
}

bool known_module_name(std::string_view m) {
  m = module_leaf(m);
  for (const char* g : {"self_attn", "linear_attn", "mlp"})
    if (find_piece(g, m)) return true;
  return false;
}

// A key split into its layer, module and matrix, or a reason it is not one we apply.
struct Key {
  int64_t layer = -1;
  std::string group, module;
  char matrix = 0;  // 'A' or 'B'
};

std::string parse_key(const std::string& name, Key& k) {
  std::string_view s = name;
  bool found = false;
  for (std::string_view prefix : {"base_model.model.model.language_model.layers.", "base_model.model.model.layers."})
    if (s.substr(0, prefix.size()) == prefix) {
      s.remove_prefix(prefix.size());
      found = true;
      break;
    }
  if (!found) {
    if (name.find("lm_head") != std::string::npos) return "adapters on lm_head cannot be applied";
    if (name.find("embed") != std::string::npos) return "adapters on the embedding cannot be applied";
    if (name.find("mtp.") != std::string::npos) return "adapters on the MTP module cannot be applied";
    return "is not a LoRA weight of a decoder layer (base_model.model.model[.language_model].layers.N...)";
  }
  const size_t dot = s.find('.');
  if (dot == std::string_view::npos || dot == 0 || dot > 6) return "has no layer number";
  int64_t layer = 0;
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + dot, layer);
  if (ec != std::errc() || ptr != s.data() + dot) return "has no layer number";
  s.remove_prefix(dot + 1);
  std::string_view suffix;
  for (const char* m : {".lora_A.weight", ".lora_B.weight"}) {
    const std::string_view ms = m;
    if (s.size() > ms.size() && s.substr(s.size() - ms.size()) == ms) {
      k.matrix = ms[6];
      suffix = ms;
    }
  }
  if (!k.matrix) {
    if (s.find("lora_magnitude_vector") != std::string_view::npos) return "is a DoRA magnitude (not supported)";
    if (s.find("lora_embedding") != std::string_view::npos) return "adapts an embedding (not supported)";
    return "is not a lora_A.weight or lora_B.weight";
  }
  s.remove_suffix(suffix.size());
  const size_t g = s.find('.');
  if (g == std::string_view::npos) return "names no module";
  k.layer = layer;
  k.group = std::string(s.substr(0, g));
  k.module = std::string(s.substr(g + 1));
  if (!find_piece(k.group, k.module))
    return "adapts " + k.group + "." + k.module +
           ", which cannot be applied (q/k/v/o_proj, gate/up/down_proj, linear_attn.in_proj_qkv/_q/_k/_v/_z/_b/_a, "
           "out_proj)";
  return {};
}

// The values widened exactly (data may sit at any offset of the file: copied, never cast).
std::vector<float> to_f32(const SafetensorsFile::TensorInfo& t, const std::string& who) {
  const size_t n = static_cast<size_t>(t.numel());
  std::vector<float> out(n);
  const auto* p = static_cast<const unsigned char*>(t.data);
  switch (t.dtype) {
    case StDType::f32:
      if (n) std::memcpy(out.data(), p, n * 4);
      break;
    case StDType::bf16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        const uint32_t bits = static_cast<uint32_t>(h) << 16;  // bf16 is the top half of an f32
        std::memcpy(&out[i], &bits, 4);
      }
      break;
    case StDType::f16:
      for (size_t i = 0; i < n; ++i) {
        _Float16 h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = static_cast<float>(h);
      }
      break;
    default: throw std::runtime_error(who + " is " + dtype_name(t.dtype) + " (F32, BF16 or F16 only)");
  }
  for (float v : out)
    if (!std::isfinite(v)) throw std::runtime_error(who + " holds a value that is not finite");
  return out;
}

std::string read_small_file(const std::filesystem::path& p, size_t limit) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(p, ec);
  if (ec) throw std::runtime_error(p.string() + ": cannot read: " + ec.message());
  if (size > limit)
    throw std::runtime_error(p.string() + ": " + std::to_string(size) + " bytes, above the limit of " +
                             std::to_string(limit));
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  if (!f && !f.eof()) throw std::runtime_error(p.string() + ": cannot read");
  return ss.str();
}

}  // namespace

const char* lora_target_name(LoraTarget t) { return kTargetNames[static_cast<int>(t)]; }

LoraTargetShape lora_target_shape(const ModelConfig& c, LoraTarget t) {
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  const int64_t q_out = 2 * c.num_heads * c.head_dim, kv_out = c.num_kv_heads * c.head_dim;
  switch (t) {
    case LoraTarget::q_proj: return {H, q_out, 1, true, false};
    case LoraTarget::k_proj: return {H, kv_out, 1, true, false};
    case LoraTarget::v_proj: return {H, kv_out, 1, true, false};
    case LoraTarget::o_proj: return {c.num_heads * c.head_dim, H, 1, true, false};
    case LoraTarget::in_proj_qkv: return {H, c.conv_dim(), 3, false, true};
    case LoraTarget::in_proj_z: return {H, c.deltanet_value_dim(), 1, false, true};
    case LoraTarget::in_proj_b: return {H, c.deltanet_v_heads, 1, false, true};
    case LoraTarget::in_proj_a: return {H, c.deltanet_v_heads, 1, false, true};
    case LoraTarget::out_proj: return {c.deltanet_value_dim(), H, 1, false, true};
    case LoraTarget::gate_proj: return {H, I, 1, true, true};
    case LoraTarget::up_proj: return {H, I, 1, true, true};
    case LoraTarget::down_proj: return {I, H, 1, true, true};
  }
  return {};
}

std::string LoraAdapter::ignored() const {
  std::string out;
  if (ignored_tower_tensors > 0)
    out = std::to_string(ignored_tower_tensors) + " tensors of the vision tower left out (LoRA adapts the language model only)";
  if (!ignored_targets.empty()) {
    out += out.empty() ? "target modules " : "; target modules ";
    for (size_t i = 0; i < ignored_targets.size(); ++i) out += (i ? ", " : "") + ignored_targets[i];
    out += " are the vision tower's";
  }
  return out;
}

int64_t LoraAdapter::host_bytes() const {
  int64_t n = 0;
  for (const LoraModule& m : modules) n += static_cast<int64_t>((m.a.size() + m.b.size()) * sizeof(float));
  return n;
}

uint64_t max_lora_file_bytes(const ModelConfig& c, const LoraLimits& limits) {
  uint64_t per_rank = 0;
  for (int t = 0; t < kNumLoraTargets; ++t) {
    const LoraTargetShape s = lora_target_shape(c, static_cast<LoraTarget>(t));
    const uint64_t layers = static_cast<uint64_t>((s.in_full_attention ? c.num_full_layers() : 0) +
                                                  (s.in_deltanet ? c.num_deltanet_layers() : 0));
    per_rank += layers * static_cast<uint64_t>(s.in + s.out) * static_cast<uint64_t>(s.rank_factor);
  }
  // f32 values, plus the header (its own bound: SafetensorsFile::kMaxHeaderBytes).
  return per_rank * static_cast<uint64_t>(limits.max_rank) * 4u + (16u << 20);
}

LoraAdapter read_lora_adapter(std::string_view config_json, const SafetensorsFile& weights, const ModelConfig& c,
                              const LoraLimits& limits, const std::string& source) {
  LoraAdapter ad;
  ad.source = source;
  ad.config = LoraConfig::parse(config_json, source + "/adapter_config.json");
  const std::string file = source + "/" + weights.file_name();
  auto fail = [&](const std::string& what) -> void { throw std::runtime_error(file + ": " + what); };
  if (ad.config.rank > limits.max_rank)
    throw std::runtime_error(source + "/adapter_config.json: rank r = " + std::to_string(ad.config.rank) +
                             " is above --max-lora-rank " + std::to_string(limits.max_rank));
  for (const std::string& m : ad.config.target_modules)
    if (known_module_name(m))
      continue;
    else if (tower_module_name(m))
      ad.ignored_targets.push_back(m);
    else
      throw std::runtime_error(source + "/adapter_config.json: target module \"" + m +
                               "\" cannot be applied (q/k/v/o_proj, gate/up/down_proj, in_proj_qkv/_q/_k/_v/_z/_b/_a, "
                               "out_proj)");
  ad.scale = ad.config.scale();
  if (weights.tensors().size() > static_cast<size_t>(LoraLimits::kMaxTensors))
    fail("holds " + std::to_string(weights.tensors().size()) + " tensors, above the limit of " +
         std::to_string(LoraLimits::kMaxTensors));

  // (layer, target) -> piece (-1 whole, 0..2 split) -> {A, B}.
  using Pair = std::pair<const SafetensorsFile::TensorInfo*, const SafetensorsFile::TensorInfo*>;
  std::map<std::pair<int64_t, int>, std::map<int, Pair>> found;
  for (const auto& [name, info] : weights.tensors()) {
    // The vision tower's and merger's adapters are left out (as vLLM does): text requests get
    // exactly the adapter's language-model update, image requests the base tower.
    if (name.find(".visual.") != std::string::npos) {
      ++ad.ignored_tower_tensors;
      continue;
    }
    Key k;
    const std::string why = parse_key(name, k);
    if (!why.empty()) fail("tensor " + name + " " + why);
    if (k.layer < 0 || k.layer >= c.num_layers)
      fail("tensor " + name + " names layer " + std::to_string(k.layer) + " of a model with " +
           std::to_string(c.num_layers));
    const Piece& p = *find_piece(k.group, k.module);
    const LoraTargetShape shape = lora_target_shape(c, p.target);
    const bool full = c.layer_kinds[static_cast<size_t>(k.layer)] == LayerKind::full_attention;
    if (full ? !shape.in_full_attention : !shape.in_deltanet)
      fail("tensor " + name + ": layer " + std::to_string(k.layer) + " is a " +
           (full ? "full-attention" : "DeltaNet") + " layer, which has no " + k.group + "." + k.module);
    Pair& pair = found[{k.layer, static_cast<int>(p.target)}][p.piece];
    (k.matrix == 'A' ? pair.first : pair.second) = &info;
  }
  for (const auto& [where, pieces] : found) {
    const auto [layer, t] = where;
    const LoraTarget target = static_cast<LoraTarget>(t);
    const LoraTargetShape shape = lora_target_shape(c, target);
    if (pieces.count(-1) && pieces.size() > 1)
      fail("layer " + std::to_string(layer) + " adapts in_proj_qkv both whole and as split pieces");
    // The rows of the target a piece covers: all of them, or in_proj_q's, _k's or _v's.
    auto piece_rows = [&](int piece) -> std::pair<int64_t, int64_t> {
      if (piece < 0) return {0, shape.out};
      return {piece * c.deltanet_key_dim(), piece < 2 ? c.deltanet_key_dim() : c.deltanet_value_dim()};
    };
    LoraModule m;
    m.layer = layer;
    m.target = target;
    for (const auto& [piece, pair] : pieces) {
      const std::string module = "layer " + std::to_string(layer) + " " +
                                 (piece < 0 ? lora_target_name(target) : std::string("in_proj_") + "qkv"[piece]);
      if (!pair.first || !pair.second) fail(module + " has lora_" + (pair.first ? "A" : "B") + " without its partner");
      const auto& A = *pair.first;
      const auto& B = *pair.second;
      const int64_t rows = piece_rows(piece).second;
      const int64_t r = A.shape.size() == 2 ? A.shape[0] : -1;
      if (A.shape.size() != 2 || A.shape[1] != shape.in || r < 1)
        fail("tensor " + A.name + " is " + shape_str(A.shape) + ", the base model needs [r, " +
             std::to_string(shape.in) + "]");
      if (B.shape.size() != 2 || B.shape[0] != rows || B.shape[1] != r)
        fail("tensor " + B.name + " is " + shape_str(B.shape) + ", the base model needs [" + std::to_string(rows) +
             ", " + std::to_string(r) + "]");
      if (r != ad.config.rank)
        fail(module + " has rank " + std::to_string(r) + ", adapter_config.json's r is " +
             std::to_string(ad.config.rank));
      const std::vector<float> a = to_f32(A, "tensor " + A.name);
      const std::vector<float> b = to_f32(B, "tensor " + B.name);
      m.a.insert(m.a.end(), a.begin(), a.end());
      // The pieces' B side by side for now; laid out once the total rank is known.
      m.b.insert(m.b.end(), b.begin(), b.end());
      m.rank += r;
    }
    if (m.rank > limits.max_rank * shape.rank_factor)
      fail("layer " + std::to_string(layer) + " " + lora_target_name(target) + " has rank " +
           std::to_string(m.rank) + ", above --max-lora-rank");
    // Lay B out block-diagonally over the pieces: [out, rank], scale folded in.
    std::vector<float> b(static_cast<size_t>(shape.out * m.rank), 0.0f);
    int64_t col = 0;
    size_t src = 0;
    for (const auto& [piece, pair] : pieces) {
      const int64_t r = pair.first->shape[0];
      const auto [first, rows] = piece_rows(piece);
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < r; ++j)
          b[static_cast<size_t>((first + i) * m.rank + col + j)] =
              static_cast<float>(ad.scale * static_cast<double>(m.b[src + static_cast<size_t>(i * r + j)]));
      src += static_cast<size_t>(rows * r);
      col += r;
    }
    for (float v : b)
      if (!std::isfinite(v))
        fail("layer " + std::to_string(layer) + " " + lora_target_name(target) + ": lora_alpha's scale times B is not finite");
    m.b = std::move(b);
    ad.modules.push_back(std::move(m));
  }
  if (ad.modules.empty())
    fail(ad.ignored_tower_tensors > 0 ? "holds LoRA weights of the vision tower only (" +
                                            std::to_string(ad.ignored_tower_tensors) +
                                            " tensors), which this server does not adapt"
                                      : std::string("holds no LoRA weights"));
  return ad;
}

LoraAdapter load_lora_adapter(const std::filesystem::path& dir, const ModelConfig& c, const LoraLimits& limits) {
  const std::string source = dir.string();
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    throw std::runtime_error(source + ": not a directory holding adapter_config.json and adapter_model.safetensors");
  const std::string config = read_small_file(dir / "adapter_config.json", LoraConfig::kMaxBytes);
  const std::filesystem::path st = dir / "adapter_model.safetensors";
  const auto size = std::filesystem::file_size(st, ec);
  if (ec) throw std::runtime_error(st.string() + ": cannot read: " + ec.message());
  const uint64_t limit = max_lora_file_bytes(c, limits);
  if (size > limit)
    throw std::runtime_error(st.string() + ": " + std::to_string(size) + " bytes, more than an adapter of rank " +
                             std::to_string(limits.max_rank) + " on every module of this model takes (" +
                             std::to_string(limit) + ")");
  const SafetensorsFile weights(st);
  return read_lora_adapter(config, weights, c, limits, source);
}

}  // namespace ds::qwen35
