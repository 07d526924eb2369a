// LoraAdapter: a PEFT LoRA adapter for a loaded Qwen3.5 config, read into host f32 (the copy
// the server keeps, and installs into the model's slot pool: lora_slots.h).
//
// A directory as PEFT saves one: adapter_config.json (lora_config.h) and
// adapter_model.safetensors with, per adapted module, `<prefix>.layers.N.<group>.<module>.
// lora_A.weight` [r, in] and `lora_B.weight` [out, r], where <prefix> is
// base_model.model.model.language_model (Qwen3_5ForConditionalGeneration) or
// base_model.model.model (a text-only model). Modules (LoraTarget):
//   full-attention layers: self_attn.q_proj (its query and gate rows), k_proj, v_proj, o_proj;
//   DeltaNet layers: linear_attn.in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, out_proj, and
//     in_proj_q / in_proj_k / in_proj_v: adapters trained on a model that splits in_proj_qkv
//     (tinker-cookbook's). Each maps onto its rows of the fused in_proj_qkv: the pieces' A
//     matrices are stacked and their B matrices placed block-diagonally, which is exactly the
//     sum of the pieces' updates;
//   every layer: mlp.gate_proj, up_proj, down_proj.
// The scale (LoraConfig::scale) is folded into B, so the update is y += B (A x).
//
// Left out, as vLLM does for multimodal models: the vision tower's and merger's tensors
// (model.visual.*) and their module names in target_modules (PEFT's "all-linear" lists them);
// LoraAdapter::ignored() says what, for the server's log. An adapter of the tower alone is
// refused.
// Refused with std::runtime_error naming the file and the tensor or module: a tensor that is
// not one of those (lm_head, embeddings, DoRA magnitudes, biases), a module
// that the layer's kind does not have, an A without its B, a rank other than the config's r or
// above LoraLimits::max_rank, shapes that do not match the base model, non-float dtypes, and
// files above the limits (the byte size the adapter's modules could take at max_rank in f32,
// kMaxTensors tensors).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "model/qwen35/config.h"
#include "model/qwen35/lora_config.h"
#include "model/qwen35/safetensors_file.h"

namespace ds::qwen35 {

// The projections an adapter may adapt, as the model holds them.
enum class LoraTarget : uint8_t {
  q_proj, k_proj, v_proj, o_proj,
  in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, out_proj,
  gate_proj, up_proj, down_proj,
};
inline constexpr int kNumLoraTargets = 12;
const char* lora_target_name(LoraTarget t);

// A target's weight [out, in] in this model, and the most rank a slot keeps for it
// (max_rank, or 3 * max_rank for in_proj_qkv, whose split pieces stack their ranks).
struct LoraTargetShape {
  int64_t in = 0;
  int64_t out = 0;
  int64_t rank_factor = 1;
  bool in_full_attention = false;  // which layer kind has it
  bool in_deltanet = false;
};
LoraTargetShape lora_target_shape(const ModelConfig& c, LoraTarget t);

struct LoraLimits {
  static constexpr int64_t kMaxTensors = 16384;
  int64_t max_rank = 16;  // serve --max-lora-rank
};

// One adapted projection: update = b · (a · x), b already scaled.
struct LoraModule {
  int64_t layer = 0;
  LoraTarget target = LoraTarget::q_proj;
  int64_t rank = 0;      // rows of a (the pieces' ranks summed)
  std::vector<float> a;  // [rank, in]
  std::vector<float> b;  // [out, rank]
};

struct LoraAdapter {
  std::string source;  // the directory, for messages
  LoraConfig config;
  double scale = 0;
  std::vector<LoraModule> modules;  // by (layer, target)
  int64_t ignored_tower_tensors = 0;        // model.visual.* tensors left out
  std::vector<std::string> ignored_targets;  // target_modules names of the tower
  // What was left out, in words ("" when nothing was).
  std::string ignored() const;
  int64_t host_bytes() const;
};

LoraAdapter load_lora_adapter(const std::filesystem::path& dir, const ModelConfig& config, const LoraLimits& limits);
// The same from the files' contents (tests, fuzzing); `source` names them in messages.
LoraAdapter read_lora_adapter(std::string_view config_json, const SafetensorsFile& weights, const ModelConfig& config,
                              const LoraLimits& limits, const std::string& source);
// The largest adapter_model.safetensors load_lora_adapter reads for this model and rank.
uint64_t max_lora_file_bytes(const ModelConfig& config, const LoraLimits& limits);

}  // namespace ds::qwen35
