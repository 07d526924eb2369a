// GenerationDefaults: the sampling defaults of a checkpoint's generation_config.json.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace ds::server {

// Sampling defaults a checkpoint asks for in generation_config.json (temperature, top_p,
// top_k, min_p, repetition_penalty). A request that omits a parameter gets the model's
// value, else OpenAI's default -- what vLLM does with --generation-config auto.
struct GenerationDefaults {
  std::optional<float> temperature;
  std::optional<float> top_p;
  std::optional<int32_t> top_k;
  std::optional<float> min_p;
  std::optional<float> repetition_penalty;

  // Reads dir/generation_config.json when present; a malformed file is an error.
  static GenerationDefaults load(const std::filesystem::path& model_dir);
  std::string describe() const;  // for the start-up log
};

}  // namespace ds::server
