#include "model/qwen35/config.h"

#include <cctype>
#include <cmath>
#include <initializer_list>
#include <optional>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace ds::qwen35 {

namespace {

using nlohmann::json;

class Reader {
 public:
  Reader(const json& text, const json& root, std::string source)
      : text_(text), root_(root), source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error(source_ + ": " + what);
  }
  // A key of the text config, falling back to the top level (text-only layout: the same).
  const json* find(const std::string& key) const {
    if (text_.contains(key) && !text_[key].is_null()) return &text_[key];
    if (root_.contains(key) && !root_[key].is_null()) return &root_[key];
    return nullptr;
  }
  int64_t positive(const std::string& key) const {
    const json* v = find(key);
    if (!v) fail("missing \"" + key + "\"");
    if (!v->is_number_integer() || v->get<int64_t>() <= 0)
      fail("\"" + key + "\" must be a positive integer, got " + v->dump());
    return v->get<int64_t>();
  }
  double positive_real(const json* v, const std::string& key) const {
    if (!v) fail("missing \"" + key + "\"");
    if (!v->is_number() || !(v->get<double>() > 0))
      fail("\"" + key + "\" must be a positive number, got " + v->dump());
    return v->get<double>();
  }
  bool flag(const std::string& key, bool fallback) const {
    const json* v = find(key);
    if (!v) return fallback;
    if (!v->is_boolean()) fail("\"" + key + "\" must be true or false, got " + v->dump());
    return v->get<bool>();
  }

 private:
  const json& text_;
  const json& root_;
  std::string source_;
};

std::vector<int32_t> token_ids(const json& v, const Reader& r, const std::string& key) {
  std::vector<int32_t> out;
  auto one = [&](const json& x) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > INT32_MAX)
      r.fail("\"" + key + "\" must hold token ids, got " + v.dump());
    out.push_back(static_cast<int32_t>(x.get<int64_t>()));
  };
  if (v.is_array()) {
    for (const auto& x : v) one(x);
  } else if (!v.is_null()) {
    one(v);
  }
  return out;
}

// The module names listed under any of `keys` (absent or null: none).
template <class Bad>
std::vector<std::string> module_list(const json& q, std::initializer_list<const char*> keys, Bad&& bad) {
  std::vector<std::string> out;
  for (const char* key : keys) {
    if (!q.contains(key) || q[key].is_null()) continue;
    if (!q[key].is_array()) bad(std::string(key) + " is not a list");
    for (const auto& m : q[key]) {
      if (!m.is_string()) bad(std::string(key) + " holds " + m.dump() + ", not a module name");
      out.push_back(m.get<std::string>());
    }
  }
  return out;
}

// The integer under the first of `keys` present (AutoAWQ's and HF's spellings differ).
template <class Bad>
std::optional<int64_t> int_key(const json& q, std::initializer_list<const char*> keys, Bad&& bad) {
  for (const char* key : keys) {
    if (!q.contains(key) || q[key].is_null()) continue;
    if (!q[key].is_number_integer()) bad(std::string(key) + " " + q[key].dump() + " is not an integer");
    return q[key].get<int64_t>();
  }
  return std::nullopt;
}

template <class Bad>
bool bool_key(const json& q, const char* key, bool fallback, Bad&& bad) {
  if (!q.contains(key) || q[key].is_null()) return fallback;
  if (!q[key].is_boolean()) bad(std::string(key) + " " + q[key].dump() + " is not true or false");
  return q[key].get<bool>();
}

template <class Bad>
std::string string_key(const json& q, const char* key, const std::string& fallback, Bad&& bad) {
  if (!q.contains(key) || q[key].is_null()) return fallback;
  if (!q[key].is_string()) bad(std::string(key) + " " + q[key].dump() + " is not a string");
  return q[key].get<std::string>();
}

std::string lower(std::string s) {
  for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

// The block-wise FP8 of Qwen's -FP8 releases.
Fp8Config fp8_config(const json& q, const Reader& r) {
  auto bad = [&](const std::string& what) { r.fail("quantization_config: " + what); };
  if (q.contains("fmt") && q["fmt"] != "e4m3")
    bad("fmt " + q["fmt"].dump() + " is not supported (only e4m3)");
  if (q.contains("activation_scheme") && q["activation_scheme"] != "dynamic")
    bad("activation_scheme " + q["activation_scheme"].dump() + " is not supported (only dynamic)");
  Fp8Config f;
  if (!q.contains("weight_block_size") || q["weight_block_size"].is_null())
    bad("no weight_block_size: per-tensor FP8 scales are not supported (only [128, 128] blocks)");
  const json& b = q["weight_block_size"];
  if (!b.is_array() || b.size() != 2 || b[0] != 128 || b[1] != 128)
    bad("weight_block_size " + b.dump() + " is not supported (only [128, 128])");
  f.modules_to_not_convert = module_list(q, {"modules_to_not_convert", "ignored_layers"}, bad);
  return f;
}

// GPTQ (AutoGPTQ / GPTQModel, as vLLM's gptq and gptq_marlin read it) and AWQ (AutoAWQ's GEMM
// layout, vLLM's awq and awq_marlin): 4-bit codes in groups of input columns.
Int4Config int4_config(const json& q, const std::string& method, const Reader& r) {
  auto bad = [&](const std::string& what) { r.fail("quantization_config: " + what); };
  Int4Config c;
  c.method = method == "gptq" ? Int4Method::gptq : Int4Method::awq;
  const auto bits = int_key(q, {"bits", "w_bit"}, bad);
  if (!bits) bad("no bits");
  if (*bits != 4) bad("bits " + std::to_string(*bits) + " is not supported (only 4-bit " + method + " weights)");
  const auto group = int_key(q, {"group_size", "q_group_size"}, bad);
  if (!group) bad("no group_size");
  if (*group != -1 && *group <= 0) bad("group_size " + std::to_string(*group) + " must be positive or -1");
  c.group_size = *group;
  if (c.method == Int4Method::gptq) {
    c.desc_act = bool_key(q, "desc_act", false, bad);
    c.sym = bool_key(q, "sym", true, bad);
    // GPTQModel writes checkpoint_format, older exports format; both name the qzeros convention.
    std::string format = lower(string_key(q, "checkpoint_format", "", bad));
    const std::string other = lower(string_key(q, "format", "", bad));
    if (format.empty()) format = other;
    if (!other.empty() && other != format)
      bad("checkpoint_format " + format + " and format " + other + " disagree");
    if (format.empty()) format = "gptq";
    if (format != "gptq" && format != "gptq_v2")
      bad("checkpoint_format " + format + " is not supported (gptq or gptq_v2: the packed layout of AutoGPTQ and GPTQModel)");
    c.zeros_minus_one = format == "gptq";
    const std::string pack = lower(string_key(q, "pack_dtype", "int32", bad));
    if (pack != "int32") bad("pack_dtype " + pack + " is not supported (only int32)");
    if (q.contains("dynamic") && !q["dynamic"].is_null()) {
      if (!q["dynamic"].is_object()) bad("dynamic is not an object");
      for (const auto& [rule, override] : q["dynamic"].items()) {
        if (!override.is_object() || !override.empty())
          bad("dynamic rule \"" + rule + "\" overrides " + override.dump() +
              ": per-module settings are not supported (only exclusions, \"-:regex\": {})");
        if (rule.rfind("-:", 0) == 0) c.modules_not_quantized.push_back(rule.substr(2));
      }
    }
  } else {
    c.sym = false;
    c.zeros_minus_one = false;
    if (!bool_key(q, "zero_point", true, bad))
      bad("zero_point false is not supported (only AWQ with zero points, the GEMM layout)");
    const std::string version = lower(string_key(q, "version", "gemm", bad));
    if (version != "gemm") bad("version " + version + " is not supported (only AWQ's gemm layout)");
  }
  for (auto& m : module_list(q, {"modules_to_not_convert"}, bad)) c.modules_not_quantized.push_back(std::move(m));
  return c;
}

// quantization_config: the block-wise FP8 of Qwen's -FP8 releases, or 4-bit GPTQ / AWQ.
void quantization(const json& q, const Reader& r, ModelConfig& c) {
  auto bad = [&](const std::string& what) { r.fail("quantization_config: " + what); };
  if (!q.is_object()) bad("is not an object");
  const std::string method = q.contains("quant_method") && q["quant_method"].is_string()
                                 ? lower(q["quant_method"].get<std::string>())
                                 : (q.contains("quant_method") ? q["quant_method"].dump() : std::string("(none)"));
  if (method == "fp8")
    c.fp8 = fp8_config(q, r);
  else if (method == "gptq" || method == "awq")
    c.int4 = int4_config(q, method, r);
  else
    bad("quant_method " + method + " is not supported (fp8: block-wise e4m3; gptq or awq: 4-bit)");
}

// HF's _compute_yarn_parameters' reading of its inputs (config.h).
template <class Key>
ModelConfig::Yarn yarn_config(const Key& key, const Reader& r, int64_t max_position_embeddings) {
  ModelConfig::Yarn y;
  auto number = [&](const char* name) -> std::optional<double> {
    const json* v = key(name);
    if (!v) return std::nullopt;
    if (!v->is_number() || !std::isfinite(v->get<double>())) r.fail(std::string("yarn: \"") + name + "\" must be a number");
    return v->get<double>();
  };
  // The pretraining length: the text config's top-level key first (HF's standardize_rope_params).
  const json* orig = r.find("original_max_position_embeddings");
  if (!orig) orig = key("original_max_position_embeddings");
  if (orig) {
    if (!orig->is_number_integer() || orig->get<int64_t>() <= 0)
      r.fail("yarn: \"original_max_position_embeddings\" must be a positive integer, got " + orig->dump());
    y.original_max_positions = orig->get<int64_t>();
  } else {
    y.original_max_positions = max_position_embeddings;
  }
  if (y.original_max_positions <= 0) r.fail("yarn needs \"original_max_position_embeddings\" (or max_position_embeddings)");
  if (const auto f = number("factor")) {
    y.factor = *f;
  } else if (max_position_embeddings > 0) {
    y.factor = static_cast<double>(max_position_embeddings) / static_cast<double>(y.original_max_positions);
  } else {
    r.fail("yarn needs \"factor\"");
  }
  if (!(y.factor >= 1)) r.fail("yarn: \"factor\" must be at least 1");
  // `or` in HF: 0 and null both take the default.
  if (const auto b = number("beta_fast"); b && *b != 0) y.beta_fast = *b;
  if (const auto b = number("beta_slow"); b && *b != 0) y.beta_slow = *b;
  if (!(y.beta_fast > 0 && y.beta_slow > 0)) r.fail("yarn: beta_fast and beta_slow must be positive");
  auto mscale = [](double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; };
  const auto af = number("attention_factor"), ms = number("mscale"), ms_all = number("mscale_all_dim");
  if (af)
    y.attention_factor = *af;
  else if (ms && *ms != 0 && ms_all && *ms_all != 0)
    y.attention_factor = mscale(y.factor, *ms) / mscale(y.factor, *ms_all);
  else
    y.attention_factor = mscale(y.factor, 1.0);
  if (!(y.attention_factor > 0)) r.fail("yarn: the attention factor must be positive");
  if (const json* t = key("truncate")) {
    if (!t->is_boolean()) r.fail("yarn: \"truncate\" must be true or false");
    y.truncate = t->get<bool>();
  }
  return y;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error(p.string() + ": cannot open");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

int64_t ModelConfig::num_full_layers() const {
  int64_t n = 0;
  for (auto k : layer_kinds) n += k == LayerKind::full_attention;
  return n;
}

int64_t ModelConfig::num_deltanet_layers() const {
  return static_cast<int64_t>(layer_kinds.size()) - num_full_layers();
}

kvcache::CacheGeometry ModelConfig::cache_geometry(DType kv_dtype, DType recurrent_state_dtype) const {
  kvcache::CacheGeometry g;
  g.n_attention_layers = num_full_layers();
  g.n_kv_heads = num_kv_heads;
  g.head_dim = head_dim;
  g.k_dtype = kv_dtype;
  g.v_dtype = kv_dtype;
  g.state.n_layers = num_deltanet_layers();
  g.state.conv_dim = conv_dim();
  g.state.conv_taps = conv_kernel - 1;
  g.state.value_heads = deltanet_v_heads;
  g.state.key_dim = deltanet_k_dim;
  g.state.value_dim = deltanet_v_dim;
  g.state.conv_dtype = DType::f32;
  g.state.recurrent_dtype = recurrent_state_dtype;
  return g;
}

int64_t ModelConfig::max_positions() const {
  int64_t n = max_position_embeddings;
  if (yarn) {
    const double scaled = yarn->factor * static_cast<double>(yarn->original_max_positions);
    if (scaled < 9.0e15) n = std::max(n, static_cast<int64_t>(scaled));
  }
  return n;
}

std::string ModelConfig::merge_overrides(std::string_view config_json, std::string_view overrides_json,
                                         const std::string& source) {
  if (overrides_json.empty()) return std::string(config_json);
  const json over = json::parse(overrides_json, nullptr, false);
  if (over.is_discarded() || !over.is_object()) throw std::runtime_error("hf-overrides: not a JSON object");
  json root = json::parse(config_json, nullptr, false);
  if (root.is_discarded() || !root.is_object()) throw std::runtime_error(source + ": not a JSON object");
  if (root.contains("text_config") && root["text_config"].is_object()) {
    for (const auto& [key, value] : over.items())
      if (key != "text_config" && root["text_config"].contains(key))
        throw std::runtime_error("hf-overrides: \"" + key + "\" is read from text_config in this checkpoint's config; "
                                 "give it as {\"text_config\": {\"" + key + "\": ...}}");
  }
  root.merge_patch(over);
  return root.dump();
}

ModelConfig ModelConfig::parse(std::string_view config_json, std::string_view generation_json,
                               const std::string& source, std::string_view overrides_json) {
  json root;
  try {
    root = json::parse(merge_overrides(config_json, overrides_json, source));
  } catch (const json::exception& e) {
    throw std::runtime_error(source + ": not valid JSON: " + e.what());
  }
  if (!root.is_object()) throw std::runtime_error(source + ": not a JSON object");
  ModelConfig c;
  c.multimodal_layout = root.contains("text_config");
  const json empty = json::object();
  if (c.multimodal_layout && !root["text_config"].is_object())
    throw std::runtime_error(source + ": \"text_config\" is not an object");
  const json& text = c.multimodal_layout ? root["text_config"] : empty;
  Reader r(text, root, source);

  const json& top = root;
  for (const json* scope : {&text, &top}) {
    if (!scope->contains("model_type")) continue;
    const json* mt = &(*scope)["model_type"];
    const std::string t = mt->is_string() ? mt->get<std::string>() : mt->dump();
    if (t != "qwen3_5" && t != "qwen3_5_text")
      r.fail("model_type " + t + " is not a dense Qwen3.5/3.6 model (qwen3_5 or qwen3_5_text)");
  }
  if (const json* act = r.find("hidden_act"); act && *act != "silu")
    r.fail("\"hidden_act\" " + act->dump() + " is not supported (only silu)");
  if (r.flag("attention_bias", false)) r.fail("\"attention_bias\": true is not supported");

  c.vocab_size = r.positive("vocab_size");
  c.hidden_size = r.positive("hidden_size");
  c.intermediate_size = r.positive("intermediate_size");
  c.num_layers = r.positive("num_hidden_layers");
  c.rms_norm_eps = r.positive_real(r.find("rms_norm_eps"), "rms_norm_eps");
  c.num_heads = r.positive("num_attention_heads");
  c.num_kv_heads = r.positive("num_key_value_heads");
  c.head_dim = r.positive("head_dim");
  if (c.num_heads % c.num_kv_heads != 0)
    r.fail("num_attention_heads " + std::to_string(c.num_heads) + " is not a multiple of num_key_value_heads " +
           std::to_string(c.num_kv_heads));
  c.deltanet_k_heads = r.positive("linear_num_key_heads");
  c.deltanet_v_heads = r.positive("linear_num_value_heads");
  c.deltanet_k_dim = r.positive("linear_key_head_dim");
  c.deltanet_v_dim = r.positive("linear_value_head_dim");
  c.conv_kernel = r.positive("linear_conv_kernel_dim");
  if (c.deltanet_v_heads % c.deltanet_k_heads != 0)
    r.fail("linear_num_value_heads " + std::to_string(c.deltanet_v_heads) +
           " is not a multiple of linear_num_key_heads " + std::to_string(c.deltanet_k_heads));

  // RoPE: rope_parameters (transformers 5), or rope_scaling (older; it wins, as HF's
  // convert_rope_params_to_dict has it), with the top-level keys behind either.
  const json* rope = r.find("rope_parameters");
  if (rope && !rope->is_object()) r.fail("\"rope_parameters\" is not an object");
  if (const json* scaling = r.find("rope_scaling")) {
    if (!scaling->is_object()) r.fail("\"rope_scaling\" is not an object");
    if (!scaling->empty()) rope = scaling;
  }
  auto rope_key = [&](const std::string& key) -> const json* {
    if (rope && rope->contains(key) && !(*rope)[key].is_null()) return &(*rope)[key];
    return r.find(key);
  };
  const json* type = rope_key("rope_type");
  if (!type && rope && rope->contains("type") && !(*rope)["type"].is_null()) type = &(*rope)["type"];
  const std::string rope_type = !type ? "default" : type->is_string() ? type->get<std::string>() : type->dump();
  if (rope_type != "default" && rope_type != "yarn")
    r.fail("rope_type " + type->dump() + " is not supported (only default and yarn)");
  if (const json* mpe = r.find("max_position_embeddings")) {
    if (!mpe->is_number_integer() || mpe->get<int64_t>() <= 0)
      r.fail("\"max_position_embeddings\" must be a positive integer, got " + mpe->dump());
    c.max_position_embeddings = mpe->get<int64_t>();
  }
  if (rope_type == "yarn") c.yarn = yarn_config(rope_key, r, c.max_position_embeddings);
  c.rope_theta = r.positive_real(rope_key("rope_theta"), "rope_theta");
  const double factor = r.positive_real(rope_key("partial_rotary_factor"), "partial_rotary_factor");
  if (factor > 1) r.fail("partial_rotary_factor must be at most 1");
  c.rotary_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * factor);  // int() as HF
  if (c.rotary_dim <= 0 || c.rotary_dim % 2 != 0)
    r.fail("rotary dim head_dim * partial_rotary_factor = " + std::to_string(c.rotary_dim) +
           " must be positive and even");

  // M-RoPE sections, over the rotary frequencies; text-only prompts never read them.
  if (const json* sec = rope_key("mrope_section")) {
    if (!sec->is_array() || sec->size() != 3) r.fail("mrope_section must be 3 integers, got " + sec->dump());
    for (size_t i = 0; i < 3; ++i) {
      if (!(*sec)[i].is_number_integer() || (*sec)[i].get<int64_t>() < 0) r.fail("mrope_section must be 3 integers");
      c.mrope_section[i] = (*sec)[i].get<int64_t>();
    }
  } else {
    c.mrope_section = {11, 11, 10};
  }
  if (c.mrope_section[0] + c.mrope_section[1] + c.mrope_section[2] != c.rotary_dim / 2) c.mrope_section = {};

  if (const json* types = r.find("layer_types")) {
    if (!types->is_array() || static_cast<int64_t>(types->size()) != c.num_layers)
      r.fail("\"layer_types\" must list " + std::to_string(c.num_layers) + " layers");
    for (const auto& t : *types) {
      if (t == "linear_attention") c.layer_kinds.push_back(LayerKind::deltanet);
      else if (t == "full_attention") c.layer_kinds.push_back(LayerKind::full_attention);
      else r.fail("unknown layer type " + t.dump() + " in \"layer_types\"");
    }
  } else if (r.find("full_attention_interval")) {
    const int64_t every = r.positive("full_attention_interval");
    for (int64_t i = 0; i < c.num_layers; ++i)
      c.layer_kinds.push_back((i + 1) % every == 0 ? LayerKind::full_attention : LayerKind::deltanet);
  } else {
    r.fail("neither \"layer_types\" nor \"full_attention_interval\" is given");
  }
  int64_t full = 0, deltanet = 0;
  for (auto k : c.layer_kinds) c.kind_index.push_back(k == LayerKind::full_attention ? full++ : deltanet++);

  c.tie_word_embeddings = r.flag("tie_word_embeddings", false);
  if (const json* m = r.find("mtp_num_hidden_layers")) {
    if (!m->is_number_integer() || m->get<int64_t>() < 0)
      r.fail("\"mtp_num_hidden_layers\" must be a non-negative integer, got " + m->dump());
    c.mtp_layers = m->get<int64_t>();
  }
  if (const json* q = r.find("quantization_config")) quantization(*q, r, c);

  if (!generation_json.empty()) {
    json gen;
    try {
      gen = json::parse(generation_json);
    } catch (const json::exception& e) {
      throw std::runtime_error(std::string("generation_config.json: not valid JSON: ") + e.what());
    }
    if (gen.is_object() && gen.contains("eos_token_id")) {
      Reader g(gen, gen, "generation_config.json");
      c.eos_token_ids = token_ids(gen["eos_token_id"], g, "eos_token_id");
    }
  }
  if (c.eos_token_ids.empty())
    if (const json* eos = r.find("eos_token_id")) c.eos_token_ids = token_ids(*eos, r, "eos_token_id");
  for (int32_t id : c.eos_token_ids)
    if (id >= c.vocab_size) r.fail("eos token id " + std::to_string(id) + " is outside the vocabulary");
  c.vision = parse_vision_config(root, c.hidden_size, c.vocab_size, c.vision_unusable);
  if (c.vision && c.mrope_section == std::array<int64_t, 3>{}) {
    c.vision.reset();
    c.vision_unusable = "rope_parameters.mrope_section does not cover the rotary dims";
  }
  return c;
}

ModelConfig ModelConfig::load(const std::filesystem::path& dir, std::string_view overrides_json) {
  const auto config = dir / "config.json";
  if (!std::filesystem::exists(config)) throw std::runtime_error(config.string() + ": not found");
  const auto gen = dir / "generation_config.json";
  return parse(read_file(config), std::filesystem::exists(gen) ? read_file(gen) : std::string(),
               config.string(), overrides_json);
}

}  // namespace ds::qwen35
