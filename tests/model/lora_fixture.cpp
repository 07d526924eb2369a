#include "tests/model/lora_fixture.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace ds::test {
namespace {

// tests/data/tiny-qwen35/config.json
constexpr int64_t kH = 128, kI = 384, kNq = 8, kNkv = 2, kD = 256, kLayers = 8;
constexpr int64_t kKeyDim = 2 * 128, kValueDim = 4 * 128, kVHeads = 4;
bool is_full(int64_t layer) { return layer == 3 || layer == 7; }

struct Module {
  const char* group;
  const char* name;
  const char* base;  // the checkpoint's weight it adapts
  int64_t in, out;
  int64_t first_row;  // its rows of the base weight
  bool full;          // a full-attention module (else DeltaNet; MLP: both)
  bool mlp;
};

std::vector<Module> modules_of(const LoraSpec& spec) {
  const std::vector<Module> all = {
      {"self_attn", "q_proj", "q_proj", kH, 2 * kNq * kD, 0, true, false},
      {"self_attn", "k_proj", "k_proj", kH, kNkv * kD, 0, true, false},
      {"self_attn", "v_proj", "v_proj", kH, kNkv * kD, 0, true, false},
      {"self_attn", "o_proj", "o_proj", kNq * kD, kH, 0, true, false},
      {"linear_attn", "in_proj_qkv", "in_proj_qkv", kH, 2 * kKeyDim + kValueDim, 0, false, false},
      {"linear_attn", "in_proj_q", "in_proj_qkv", kH, kKeyDim, 0, false, false},
      {"linear_attn", "in_proj_k", "in_proj_qkv", kH, kKeyDim, kKeyDim, false, false},
      {"linear_attn", "in_proj_v", "in_proj_qkv", kH, kValueDim, 2 * kKeyDim, false, false},
      {"linear_attn", "in_proj_z", "in_proj_z", kH, kValueDim, 0, false, false},
      {"linear_attn", "in_proj_b", "in_proj_b", kH, kVHeads, 0, false, false},
      {"linear_attn", "in_proj_a", "in_proj_a", kH, kVHeads, 0, false, false},
      {"linear_attn", "out_proj", "out_proj", kValueDim, kH, 0, false, false},
      {"mlp", "gate_proj", "gate_proj", kH, kI, 0, false, true},
      {"mlp", "up_proj", "up_proj", kH, kI, 0, false, true},
      {"mlp", "down_proj", "down_proj", kI, kH, 0, false, true},
  };
  auto wanted = [&](const std::string& n) {
    return std::find(spec.targets.begin(), spec.targets.end(), n) != spec.targets.end();
  };
  std::vector<Module> out;
  for (const Module& m : all) {
    const std::string n = m.name;
    const bool piece = n == "in_proj_q" || n == "in_proj_k" || n == "in_proj_v";
    if (piece ? spec.split_qkv && wanted("in_proj_qkv") : wanted(n) && !(spec.split_qkv && n == "in_proj_qkv"))
      out.push_back(m);
  }
  return out;
}

std::string prefix(const LoraSpec& spec, int64_t layer) {
  return std::string(spec.text_only_keys ? "base_model.model.model.layers." : "base_model.model.model.language_model.layers.") +
         std::to_string(layer) + ".";
}

std::vector<float> floats(const StTensor& t) {
  std::vector<float> v(t.bytes.size() / 4);
  std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  return v;
}

StTensor f32_tensor(std::vector<int64_t> shape, const std::vector<float>& v) {
  StTensor t;
  t.dtype = "F32";
  t.shape = std::move(shape);
  t.bytes.resize(v.size() * 4);
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

}  // namespace

double LoraSpec::scale() const {
  return rslora ? alpha / std::sqrt(static_cast<double>(rank)) : alpha / static_cast<double>(rank);
}

StTensors random_lora_tensors(const LoraSpec& spec) {
  std::mt19937 rng(spec.seed);
  std::normal_distribution<float> normal(0.0f, spec.magnitude);
  StTensors t;
  for (int64_t l = 0; l < kLayers; ++l)
    for (const Module& m : modules_of(spec)) {
      if (!m.mlp && m.full != is_full(l)) continue;
      std::vector<float> a(static_cast<size_t>(spec.rank * m.in)), b(static_cast<size_t>(m.out * spec.rank));
      for (float& x : a) x = normal(rng);
      for (float& x : b) x = normal(rng);
      const std::string p = prefix(spec, l) + m.group + "." + m.name;
      t[p + ".lora_A.weight"] = f32_tensor({spec.rank, m.in}, a);
      t[p + ".lora_B.weight"] = f32_tensor({m.out, spec.rank}, b);
    }
  return t;
}

std::string lora_config_json(const LoraSpec& spec) {
  nlohmann::json j = {{"peft_type", "LORA"},
                      {"r", spec.rank},
                      {"lora_alpha", spec.alpha},
                      {"use_rslora", spec.rslora},
                      {"lora_dropout", 0.0},
                      {"bias", "none"},
                      {"task_type", "CAUSAL_LM"},
                      {"base_model_name_or_path", "tiny-qwen35"},
                      {"use_dora", false},
                      {"modules_to_save", nullptr},
                      {"rank_pattern", nlohmann::json::object()},
                      {"alpha_pattern", nlohmann::json::object()},
                      {"fan_in_fan_out", false}};
  nlohmann::json targets = nlohmann::json::array();
  for (const std::string& n : spec.targets) {
    if (spec.split_qkv && n == "in_proj_qkv") {
      for (const char* p : {"in_proj_q", "in_proj_k", "in_proj_v"}) targets.push_back(p);
    } else {
      targets.push_back(n);
    }
  }
  j["target_modules"] = targets;
  return j.dump(2);
}

void write_random_lora(const std::filesystem::path& dir, const LoraSpec& spec) {
  std::filesystem::create_directories(dir);
  write_text(dir / "adapter_config.json", lora_config_json(spec));
  write_safetensors(dir / "adapter_model.safetensors", random_lora_tensors(spec));
}

void write_merged_checkpoint(const std::filesystem::path& dir, const LoraSpec& spec) {
  std::filesystem::create_directories(dir);
  copy_tiny_configs(dir);
  StTensors base = read_safetensors(tiny_dir() / "model.safetensors");
  const StTensors lora = random_lora_tensors(spec);
  const double scale = spec.scale();
  for (int64_t l = 0; l < kLayers; ++l)
    for (const Module& m : modules_of(spec)) {
      if (!m.mlp && m.full != is_full(l)) continue;
      const std::string p = prefix(spec, l) + m.group + "." + m.name;
      const std::vector<float> a = floats(lora.at(p + ".lora_A.weight"));
      const std::vector<float> b = floats(lora.at(p + ".lora_B.weight"));
      const std::string wname = "model.language_model.layers." + std::to_string(l) + "." + m.group + "." + m.base + ".weight";
      StTensor& w = base.at(wname);
      if (w.dtype != "F32") w = bf16_to(w, "F32");
      std::vector<float> v = floats(w);
      const int64_t in = w.shape[1];
      if (in != m.in) throw std::logic_error("merged checkpoint: " + wname + " has another input size");
      for (int64_t i = 0; i < m.out; ++i)
        for (int64_t j = 0; j < m.in; ++j) {
          float d = 0;
          for (int64_t r = 0; r < spec.rank; ++r)
            d += b[static_cast<size_t>(i * spec.rank + r)] * a[static_cast<size_t>(r * m.in + j)];
          v[static_cast<size_t>((m.first_row + i) * in + j)] += static_cast<float>(scale) * d;
        }
      w = f32_tensor(w.shape, v);
    }
  write_safetensors(dir / "model.safetensors", base);
}

}  // namespace ds::test
