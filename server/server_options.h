// ServerOptions: serve's command line (CLI11), with the checks that need no model.
//
// The flags are the ones users know from vLLM and llama-server (serving-notes.md §6):
// the model directory (positional, as `vllm serve MODEL`, or -m / --model), --host, --port, --served-model-name, --api-key (or DELTASERVE_API_KEY),
// --paged-attention / --no-paged-attention, --max-ctx, --kv-cache-dtype, --block-size,
// --gpu-memory-utilization / --kv-cache-memory, --max-num-seqs, --max-num-batched-tokens,
// --max-queue, --enable-prefix-caching / --no-enable-prefix-caching, --prefix-cache-state-memory,
// --speculative-config, --enforce-eager, --quantization, --backend, --chat-template,
// --default-thinking-budget, --reasoning-effort-budgets, --hf-overrides, --log-level, --log-format,
// and the limits of limit_options.h. Combinations that cannot
// work are refused before anything is loaded (validate_options); checks that need the model
// (max-ctx against its positions and the cache) happen in the loader.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "server/limit_options.h"

namespace CLI {
class App;
}

namespace ds::server {

inline constexpr int64_t kDefaultCpuCacheBytes = int64_t{1} << 30;  // 1 GiB
// The part of the cache budget that holds prefix-cache state snapshots by default.
inline constexpr double kDefaultSnapshotShare = 0.1;

struct ServerOptions {
  std::string model;  // empty: the bundled tiny model (default_model_dir)
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string served_model_name;  // empty: the model directory's name
  std::string instance_id;        // empty: host:port (as bound)
  std::string api_key;
  bool paged_attention = true;
  int64_t max_ctx = 0;  // 0: min(model positions, what the cache holds)
  std::string kv_cache_dtype = "auto";
  std::string mamba_ssm_cache_dtype = "auto";  // the DeltaNet recurrent state: auto (f32), float32, bfloat16
  int block_size = 16;
  std::optional<double> gpu_memory_utilization;
  std::string kv_cache_memory;  // bytes, with an optional K/M/G/Ki/Mi/Gi suffix
  int max_num_seqs = 256;
  int64_t max_num_batched_tokens = 2048;
  int max_queue = 1024;
  bool prefix_caching = true;
  std::string prefix_cache_state_memory;  // bytes; empty = kDefaultSnapshotShare of the budget
  std::string speculative_config;         // JSON (speculative_option.h); empty = off
  bool enforce_eager = false;             // no recorded steps (EngineConfig::step_graphs)
  std::string quantization = "none";      // none or fp8 (qwen35::LoadOptions)
  std::string fp8_weights = "resident";   // resident (CudaBackendOptions::fp8_weights) or bf16 (dequantised at load)
  std::string backend = "auto";
  std::string chat_template;
  // Thinking budgets (thinking_setup.h): the budget of requests that name none, and the budgets
  // of reasoning efforts ("low=1024,medium=4096,high=16384").
  std::optional<int64_t> default_thinking_budget;
  std::string reasoning_effort_budgets;
  // JSON object deep-merged into config.json at load (vLLM's --hf-overrides; config.h).
  std::string hf_overrides;
  std::string log_level = "info";
  std::string log_format = "text";
  LimitOptions limits;  // connections, bodies, timeouts, grammar compiles (limit_options.h)
};

void add_server_options(CLI::App& app, ServerOptions& o);

// An empty string when the options can work together, else what is wrong (one line).
std::string validate_options(const ServerOptions& o);

// "1073741824", "1GiB", "512M", "1.5G" -> bytes (K/M/G are 1000-based, Ki/Mi/Gi 1024-based; a
// trailing B is optional). Throws std::invalid_argument with the text.
int64_t parse_bytes(const std::string& text);

// Where the bundled model lives: next to the executable's source tree (build/serve ->
// ../tests/data/tiny-qwen35), in the source tree it was built from, or under the current
// directory. Empty when none exists.
std::filesystem::path default_model_dir(const char* argv0);

}  // namespace ds::server
