#include "tests/model/mtp_checkpoint.h"

#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

namespace ds::test {
namespace {

constexpr int64_t kH = 128, kI = 384, kNq = 8, kNkv = 2, kD = 256;  // tests/data/tiny-qwen35/config.json

StTensor f32_tensor(std::vector<int64_t> shape, const std::vector<float>& v) {
  StTensor t;
  t.dtype = "F32";
  t.shape = std::move(shape);
  t.bytes.resize(v.size() * 4);
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

}  // namespace

StTensors tiny_mtp_tensors(uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto random = [&](std::vector<int64_t> shape, float scale) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = scale * normal(rng);
    return f32_tensor(std::move(shape), v);
  };
  StTensors t;
  const std::string p = "mtp.layers.0.";
  t["mtp.pre_fc_norm_embedding.weight"] = random({kH}, 0.1f);
  t["mtp.pre_fc_norm_hidden.weight"] = random({kH}, 0.1f);
  t["mtp.norm.weight"] = random({kH}, 0.1f);
  // fc [H, 2H]: small on the embedding's half, near the identity on the hidden state's.
  StTensor fc = random({kH, 2 * kH}, 0.02f);
  auto* w = reinterpret_cast<float*>(fc.bytes.data());
  for (int64_t r = 0; r < kH; ++r) w[r * 2 * kH + kH + r] += 1.0f;
  t["mtp.fc.weight"] = fc;
  t[p + "input_layernorm.weight"] = random({kH}, 0.1f);
  t[p + "post_attention_layernorm.weight"] = random({kH}, 0.1f);
  t[p + "self_attn.q_proj.weight"] = random({2 * kNq * kD, kH}, 0.05f);
  t[p + "self_attn.k_proj.weight"] = random({kNkv * kD, kH}, 0.05f);
  t[p + "self_attn.v_proj.weight"] = random({kNkv * kD, kH}, 0.05f);
  t[p + "self_attn.o_proj.weight"] = random({kH, kNq * kD}, 0.02f);
  t[p + "self_attn.q_norm.weight"] = random({kD}, 0.1f);
  t[p + "self_attn.k_norm.weight"] = random({kD}, 0.1f);
  t[p + "mlp.gate_proj.weight"] = random({kI, kH}, 0.05f);
  t[p + "mlp.up_proj.weight"] = random({kI, kH}, 0.05f);
  t[p + "mlp.down_proj.weight"] = random({kH, kI}, 0.02f);
  return t;
}

void write_tiny_mtp_checkpoint(const std::filesystem::path& dir, uint32_t seed) {
  copy_tiny_configs(dir);
  nlohmann::json config = nlohmann::json::parse(read_text(dir / "config.json"));
  config["text_config"]["mtp_num_hidden_layers"] = 1;
  write_text(dir / "config.json", config.dump(2));
  StTensors tensors = read_safetensors(tiny_dir() / "model.safetensors");
  for (auto& [name, t] : tiny_mtp_tensors(seed)) tensors[name] = std::move(t);
  write_safetensors(dir / "model.safetensors", tensors);
}

}  // namespace ds::test
