// LoraConfig: what adapter_config.json (as PEFT writes it) says about a LoRA adapter.
//
// Read: peft_type ("LORA"), r, lora_alpha, use_rslora (scale alpha / sqrt(r), else alpha / r)
// and target_modules (a list of module names, or one regular expression). Refused, naming the
// key: a text above kMaxBytes or nesting deeper than kMaxDepth, a non-LoRA peft_type, r or
// lora_alpha that are not positive, and what this server cannot apply faithfully: DoRA
// (use_dora), biases (bias other than "none"), modules_to_save (whole replaced modules),
// rank_pattern / alpha_pattern (per-module ranks and scales), fan_in_fan_out. Everything else
// PEFT writes (base_model_name_or_path, task_type, lora_dropout, ...) is ignored.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ds::qwen35 {

struct LoraConfig {
  static constexpr size_t kMaxBytes = 1u << 20;
  static constexpr size_t kMaxDepth = 16;

  int64_t rank = 0;      // r
  double alpha = 0;      // lora_alpha
  bool use_rslora = false;
  // target_modules: names (a list), or one regular expression (target_regex).
  std::vector<std::string> target_modules;
  std::string target_regex;

  // The factor of B·A: alpha / sqrt(r) with rsLoRA, alpha / r otherwise (PEFT's).
  double scale() const;

  // Parses the text of adapter_config.json; std::runtime_error "<source>: <what>" otherwise.
  static LoraConfig parse(std::string_view json_text, const std::string& source = "adapter_config.json");
};

}  // namespace ds::qwen35
