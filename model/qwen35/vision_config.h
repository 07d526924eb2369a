// VisionConfig: the vision tower of a Qwen3.5 / 3.6 checkpoint (config.json's vision_config
// and the image token ids at its top level; docs/vision.md). A checkpoint without one, or
// with one this engine cannot run, loads as a text model: ModelConfig::vision is then empty
// and vision_unusable says why (the server answers an image with that reason).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace ds::qwen35 {

enum class VisionAct : uint8_t { gelu_tanh, gelu_erf };

struct VisionConfig {
  int64_t depth = 0;
  int64_t hidden_size = 0;        // C
  int64_t num_heads = 0;
  int64_t intermediate_size = 0;
  int64_t patch_size = 0;         // P
  int64_t temporal_patch_size = 0;
  int64_t spatial_merge_size = 0; // m
  int64_t out_hidden_size = 0;    // the text hidden size
  int64_t num_position_embeddings = 0;  // a square grid
  double rope_theta = 10000.0;
  VisionAct act = VisionAct::gelu_tanh;  // the blocks' MLP (the merger's GELU is always exact)
  int32_t image_token_id = -1;
  int32_t video_token_id = -1;
  int32_t vision_start_token_id = -1;
  int32_t vision_end_token_id = -1;

  int64_t head_dim() const { return hidden_size / num_heads; }
  int64_t pos_grid_side() const;  // sqrt(num_position_embeddings)
  int64_t merge_unit() const { return spatial_merge_size * spatial_merge_size; }
  int64_t merged_hidden() const { return hidden_size * merge_unit(); }  // the merger's width
  int64_t patch_values() const { return 3 * patch_size * patch_size; }  // one temporal copy
};

// The vision tower of config.json (root), checked against the text tower's hidden size and
// vocabulary. nullopt with `why` set when there is none or it cannot be run.
std::optional<VisionConfig> parse_vision_config(const nlohmann::json& root, int64_t text_hidden, int64_t vocab_size,
                                                std::string& why);

}  // namespace ds::qwen35
