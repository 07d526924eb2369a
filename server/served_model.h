// ServedModel: everything a request handler needs to serve one model -- its name, tokenizer,
// chat template, engine and sampling defaults. The HTTP layer only ever sees this; who loads
// the model (serve's loader, or a test with a scripted model) owns the pieces.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "model/chat/chat_template.h"
#include "model/tokenizer/tokenizer.h"
#include "scheduler/engine.h"

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

struct ServedModel {
  std::string name;                 // what clients send as "model"
  std::filesystem::path dir;        // reported as the model's root
  const tok::Tokenizer* tokenizer = nullptr;
  const chat::ChatTemplate* chat_template = nullptr;  // null: /v1/chat/completions answers 400
  scheduler::Engine* engine = nullptr;
  std::vector<int32_t> eos_ids;     // hidden from the text when they end a reply
  GenerationDefaults defaults;
  int64_t created = 0;              // unix time the model was loaded
};

}  // namespace ds::server
