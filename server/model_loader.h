// Loading what `serve` serves: backend, weights, tokenizer, chat template, cache pools and
// engine, from ServerOptions, with the start-up log users read to size their deployment:
//   weights     layers, checkpoint bytes, resident bytes on the backend, load time
//   K/V cache   blocks x block size = token capacity, bytes, element type, layout
//   state slots DeltaNet slots, bytes per sequence
//   concurrency how many max-ctx requests fit at once (slots vs token capacity)
// On a terminal a progress bar follows the weight files being read.
//
// --backend auto picks cuda when the build has it and a device is present, else cpu; hip
// fails here with a message saying so. On cuda the cache budget is what
// --gpu-memory-utilization leaves after the weights and one profiling step of
// --max-num-batched-tokens (model/qwen35/device_budget.h), unless --kv-cache-memory gives
// it. The engine sizes the pools from that budget (scheduler::Engine; kvcache/capacity.h).
//
// A benchmark's composition root may change what the engine is made of before it starts
// (EngineComposer: programs/serve_bench hands it drafters at a controlled acceptance, wraps
// its model and sampler, or asks for the contiguous baseline); serve passes none.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "kernels/backend.h"
#include "model/chat/chat_template.h"
#include "model/qwen35/model.h"
#include "model/qwen35/vision_encoder.h"
#include "model/tokenizer/tokenizer.h"
#include "scheduler/drafter.h"
#include "scheduler/engine.h"
#include "scheduler/forward_model.h"
#include "server/lora_registry.h"
#include "server/metrics.h"
#include "server/served_model.h"
#include "server/server_options.h"

namespace ds::server {

struct LoadedModel {
  // Declaration order is destruction order reversed: the engine goes first, the backend last.
  std::unique_ptr<kernels::Backend> backend;
  std::unique_ptr<qwen35::Model> model;
  std::unique_ptr<qwen35::VisionEncoder> encoder;  // null: no images (none in the checkpoint, or --language-model-only)
  std::unique_ptr<VisionServing> vision;
  std::unique_ptr<scheduler::ForwardModel> forward;  // the engine's view of model (or what wraps it)
  std::unique_ptr<tok::Tokenizer> tokenizer;
  std::unique_ptr<chat::ChatTemplate> chat_template;
  std::unique_ptr<GrammarCache> grammars;
  std::unique_ptr<LoraRegistry> loras;  // --enable-lora
  std::unique_ptr<scheduler::Engine> engine;
  ServedModel served;
  uint64_t fingerprint = 0;  // for the disk tier (model_fingerprint.h); 0 without one
};

// The model directory serve will use (--model or the bundled one); throws when none.
std::string resolve_model_dir(const ServerOptions& o, const char* argv0);
// The served name: --served-model-name or the directory's name.
std::string served_name(const ServerOptions& o, const std::string& model_dir);
// Empty when this build has the backend --backend names, else why not and how to build it
// (serve checks it before it binds its port).
std::string backend_not_built(const ServerOptions& o);

// The sampler for a loaded model on `backend` and whether it reads the logits where the
// backend leaves them: a CUDA backend samples on the device (only token ids and logprobs
// cross to the host); any other samples on the host.
struct BackendSampler {
  std::unique_ptr<kernels::Sampler> sampler;
  bool device_logits = false;
};
BackendSampler make_sampler(kernels::Backend& backend);

// What the engine is made of, just before it starts: its model (the loaded model's adapter),
// the sampler, its drafter (null: the one config.speculative names) and its configuration. A
// composer may replace any of them; a model it wraps must own or outlive what it wraps.
struct EngineParts {
  std::unique_ptr<scheduler::ForwardModel> model;
  std::unique_ptr<kernels::Sampler> sampler;
  std::unique_ptr<scheduler::Drafter> drafter;
  scheduler::EngineConfig config;
};
using EngineComposer = std::function<void(EngineParts&)>;

// Throws std::runtime_error (or std::invalid_argument) with a message fit for the user.
// metrics (may be null) gets every finished engine request (EngineConfig::on_finish).
std::unique_ptr<LoadedModel> load_model(const ServerOptions& o, const std::string& model_dir, bool progress_bar,
                                        ServerMetrics* metrics, const EngineComposer& compose = {});

}  // namespace ds::server
