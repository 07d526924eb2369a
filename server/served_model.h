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
#include "server/generation_defaults.h"
#include "server/grammar_cache.h"
#include "server/image_inputs.h"
#include "server/lora_registry.h"
#include "server/thinking_setup.h"

namespace ds::server {

struct ServedModel {
  std::string name;                 // what clients send as "model"
  std::filesystem::path dir;        // reported as the model's root
  const tok::Tokenizer* tokenizer = nullptr;
  const chat::ChatTemplate* chat_template = nullptr;  // null: /v1/chat/completions answers 400
  scheduler::Engine* engine = nullptr;
  std::vector<int32_t> eos_ids;     // hidden from the text when they end a reply
  GenerationDefaults defaults;
  int64_t created = 0;              // unix time the model was loaded
  // Compiled structured-output grammars for this model's vocabulary; null: structured
  // outputs are refused (400).
  GrammarCache* grammars = nullptr;
  // Images (image_inputs.h); null: the model takes none, and vision_unusable says why.
  const VisionServing* vision = nullptr;
  std::string vision_unusable = "it has no vision tower";
  // Reasoning tags, the close sequence and the budget settings (thinking_setup.h).
  ThinkingSetup thinking;
  // LoRA adapters requests may name as their model (lora_registry.h); null: none. With
  // runtime_lora, /v1/load_lora_adapter and /v1/unload_lora_adapter change them.
  LoraRegistry* loras = nullptr;
  bool runtime_lora = false;
};

}  // namespace ds::server
