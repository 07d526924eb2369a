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
// it. --no-paged-attention on cpu sizes the cache as the
// contiguous baseline does -- every sequence reserves a full max-ctx of K/V, so the
// sequences that fit are budget / (max-ctx K/V + one state slot), each guaranteed its whole
// context and never preempted -- while the blocks themselves stay paged, because the CPU
// model only has the paged attention path (the contiguous kernel layout comes with the
// CUDA backend). Capacity and admission A/B comparisons are therefore faithful on cpu;
// kernel-speed comparisons need the GPU.
#pragma once

#include <memory>
#include <string>

#include "kernels/backend.h"
#include "model/chat/chat_template.h"
#include "model/qwen35/model.h"
#include "model/tokenizer/tokenizer.h"
#include "scheduler/engine.h"
#include "scheduler/qwen35_forward_model.h"
#include "server/metrics.h"
#include "server/served_model.h"
#include "server/server_options.h"

namespace ds::server {

struct LoadedModel {
  // Declaration order is destruction order reversed: the engine goes first, the backend last.
  std::unique_ptr<kernels::Backend> backend;
  std::unique_ptr<qwen35::Model> model;
  std::unique_ptr<scheduler::Qwen35ForwardModel> forward;
  std::unique_ptr<tok::Tokenizer> tokenizer;
  std::unique_ptr<chat::ChatTemplate> chat_template;
  std::unique_ptr<GrammarCache> grammars;
  std::unique_ptr<scheduler::Engine> engine;
  ServedModel served;
};

// The model directory serve will use (--model or the bundled one); throws when none.
std::string resolve_model_dir(const ServerOptions& o, const char* argv0);
// The served name: --served-model-name or the directory's name.
std::string served_name(const ServerOptions& o, const std::string& model_dir);

// The sampler for a loaded model on `backend` and whether it reads the logits where the
// backend leaves them: a CUDA backend samples on the device (only token ids and logprobs
// cross to the host); any other samples on the host.
struct BackendSampler {
  std::unique_ptr<kernels::Sampler> sampler;
  bool device_logits = false;
};
BackendSampler make_sampler(kernels::Backend& backend);

// Throws std::runtime_error (or std::invalid_argument) with a message fit for the user.
// metrics (may be null) gets every finished engine request (EngineConfig::on_finish).
std::unique_ptr<LoadedModel> load_model(const ServerOptions& o, const std::string& model_dir, bool progress_bar,
                                        ServerMetrics* metrics);

}  // namespace ds::server
