#include "model/qwen35/vision_config.h"

#include <cmath>

#include <nlohmann/json.hpp>

namespace ds::qwen35 {

int64_t VisionConfig::pos_grid_side() const {
  return static_cast<int64_t>(std::lround(std::sqrt(static_cast<double>(num_position_embeddings))));
}

std::optional<VisionConfig> parse_vision_config(const nlohmann::json& root, int64_t text_hidden, int64_t vocab_size,
                                                std::string& why) {
  why.clear();
  if (!root.contains("vision_config") || !root["vision_config"].is_object()) {
    why = "the checkpoint has no vision tower (no vision_config in config.json)";
    return std::nullopt;
  }
  const nlohmann::json& v = root["vision_config"];
  VisionConfig c;
  auto integer = [&](const nlohmann::json& obj, const char* key, int64_t fallback, int64_t lo, int64_t hi) -> int64_t {
    if (!why.empty()) return fallback;
    if (!obj.contains(key) || obj[key].is_null()) {
      if (fallback >= 0) return fallback;
      why = std::string("vision_config has no ") + key;
      return 0;
    }
    if (!obj[key].is_number_integer() || obj[key].get<int64_t>() < lo || obj[key].get<int64_t>() > hi) {
      why = std::string("vision_config.") + key + " = " + obj[key].dump() + " is not supported";
      return 0;
    }
    return obj[key].get<int64_t>();
  };
  c.depth = integer(v, "depth", -1, 1, 256);
  c.hidden_size = integer(v, "hidden_size", -1, 1, 1 << 16);
  c.num_heads = integer(v, "num_heads", -1, 1, 1024);
  c.intermediate_size = integer(v, "intermediate_size", -1, 1, 1 << 18);
  c.patch_size = integer(v, "patch_size", 16, 1, 64);
  c.temporal_patch_size = integer(v, "temporal_patch_size", 2, 1, 8);
  c.spatial_merge_size = integer(v, "spatial_merge_size", 2, 1, 8);
  c.out_hidden_size = integer(v, "out_hidden_size", -1, 1, 1 << 18);
  c.num_position_embeddings = integer(v, "num_position_embeddings", -1, 1, 1 << 20);
  if (integer(v, "in_channels", 3, 3, 3) != 3 && why.empty()) why = "vision_config.in_channels must be 3";
  auto token = [&](const char* key, int64_t fallback) {
    const int64_t id = integer(root, key, fallback, 0, vocab_size - 1);
    return static_cast<int32_t>(id);
  };
  c.image_token_id = token("image_token_id", -1);
  c.video_token_id = token("video_token_id", -1);
  c.vision_start_token_id = token("vision_start_token_id", -1);
  c.vision_end_token_id = token("vision_end_token_id", -1);
  if (!why.empty()) {
    // Ids past the vocabulary are a tiny text checkpoint's leftover tower (tests/data/tiny-qwen35).
    return std::nullopt;
  }
  const std::string act = v.contains("hidden_act") && v["hidden_act"].is_string() ? v["hidden_act"].get<std::string>()
                                                                                 : "gelu_pytorch_tanh";
  if (act == "gelu_pytorch_tanh" || act == "gelu_new") c.act = VisionAct::gelu_tanh;
  else if (act == "gelu") c.act = VisionAct::gelu_erf;
  else why = "vision_config.hidden_act " + act + " is not supported";
  if (v.contains("rope_parameters") && v["rope_parameters"].is_object()) {
    const auto& rp = v["rope_parameters"];
    if (rp.contains("rope_type") && rp["rope_type"] != "axial" && rp["rope_type"] != "default")
      why = "vision_config.rope_parameters.rope_type " + rp["rope_type"].dump() + " is not supported";
    if (rp.contains("rope_theta") && rp["rope_theta"].is_number()) c.rope_theta = rp["rope_theta"].get<double>();
  }
  if (why.empty() && c.hidden_size % c.num_heads != 0) why = "vision_config.hidden_size is not a multiple of num_heads";
  if (why.empty() && c.head_dim() % 4 != 0) why = "the vision head size must be a multiple of 4 (axial 2-D rotary)";
  const int64_t side = c.pos_grid_side();
  if (why.empty() && side * side != c.num_position_embeddings)
    why = "vision_config.num_position_embeddings is not a square";
  if (why.empty() && c.out_hidden_size != text_hidden)
    why = "vision_config.out_hidden_size " + std::to_string(c.out_hidden_size) + " differs from the text hidden size " +
          std::to_string(text_hidden);
  if (!why.empty()) return std::nullopt;
  return c;
}

}  // namespace ds::qwen35
