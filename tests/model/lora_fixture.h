// Random PEFT LoRA adapters for the bundled tiny checkpoint, and the oracle they are checked
// against: a copy of the checkpoint with the adapter merged into its weights (W + scale * B A,
// in f32), which the plain engine runs.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/model/st_writer.h"

namespace ds::test {

struct LoraSpec {
  uint32_t seed = 1;
  int64_t rank = 4;
  double alpha = 8;
  bool rslora = false;
  // in_proj_q / in_proj_k / in_proj_v (a model that splits in_proj_qkv) instead of in_proj_qkv.
  bool split_qkv = false;
  // base_model.model.model.layers... (text-only) instead of ...model.language_model.layers...
  bool text_only_keys = false;
  float magnitude = 0.1f;  // std of A's and B's entries
  // Module names (PEFT's target_modules); every layer that has one is adapted.
  std::vector<std::string> targets = {"q_proj",    "k_proj",    "v_proj",    "o_proj",    "gate_proj",
                                      "up_proj",   "down_proj", "in_proj_qkv", "in_proj_z", "in_proj_b",
                                      "in_proj_a", "out_proj"};
  double scale() const;
};

// The adapter's tensors (F32), keyed as PEFT writes them.
StTensors random_lora_tensors(const LoraSpec& spec);
// adapter_config.json's text for spec.
std::string lora_config_json(const LoraSpec& spec);
// Writes adapter_config.json and adapter_model.safetensors into dir.
void write_random_lora(const std::filesystem::path& dir, const LoraSpec& spec);
// Writes the tiny checkpoint with spec's adapter merged in (adapted weights in F32) into dir.
void write_merged_checkpoint(const std::filesystem::path& dir, const LoraSpec& spec);

}  // namespace ds::test
